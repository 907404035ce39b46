import { appendFile, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Low } from "lowdb";
import { JSONFile } from "lowdb/node";
import type { DeliveryMessage } from "../delivery/message.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import type { LogFn } from "../log.js";
import { inRecreatedDir } from "./writable-dir.js";

/** How long an acknowledged delivery's id is remembered, so the same delivery is not queued again. */
export const DELIVERED_KEPT_MS = 7 * 24 * 3_600_000;

/** One message to one target, from the moment it is queued until it is acknowledged or given up. */
export interface OutboxEntry {
  /** `<run id>:<target key>`: the idempotency key; the senders derive webhook-id and Message-ID from it. */
  id: string;
  target: DeliveryTarget;
  message: DeliveryMessage;
  /** Where the run's workspace is, for attachments resolved at send time. */
  workspace: string;
  /** ISO 8601, as are all times here. */
  createdAt: string;
  /** 24 h after creation, or after `countd outbox retry`; a failure past it is final. */
  giveUpAt: string;
  /** Counted on disk before each send, so an attempt cut short by a crash still counts. */
  attempts: number;
  lastAttemptAt?: string;
  nextAttemptAt: string;
  status: "pending" | "dead";
  lastError?: string;
}

export interface DisabledTarget {
  at: string;
  /** What a delivery to it is marked dead with, e.g. "target disabled after HTTP 410". */
  reason: string;
}

export interface OutboxData {
  /** Pending and dead deliveries by id; acknowledged ones move to the delivered log. */
  entries: Record<string, OutboxEntry>;
  /** By target key. */
  disabledTargets: Record<string, DisabledTarget>;
}

const empty = (): OutboxData => ({ entries: {}, disabledTargets: {} });

/**
 * The outbox on disk, in two files of the state directory:
 * - outbox.json (lowdb, rewritten atomically on each change) holds only what is still in play,
 *   pending and dead deliveries and disabled targets, so it stays small however many runs there were;
 * - outbox-delivered.jsonl, appended to once per acknowledged delivery, is what makes an
 *   acknowledgement final: an id in it is never sent or queued again for DELIVERED_KEPT_MS.
 * A crash between the two writes leaves an acknowledged entry in outbox.json; opening drops it.
 */
export class OutboxStore {
  /** The write on its way to disk, and the one queued behind it that every change meanwhile shares. */
  private writing: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;

  private constructor(
    readonly file: string,
    private readonly db: Low<OutboxData>,
    private readonly delivered: DeliveredLog,
    private readonly inStateDir: <T>(write: () => Promise<T>) => Promise<T>,
  ) {}

  /** `log`: where a state directory removed while countd runs is reported (it is created again). */
  static async open(stateDir: string, now: Date, log?: LogFn): Promise<OutboxStore> {
    await mkdir(stateDir, { recursive: true });
    const file = join(stateDir, "outbox.json");
    const db = new Low(new JSONFile<OutboxData>(file), empty());
    try {
      await db.read();
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      throw new Error(`the outbox file ${file} is not valid JSON (${err.message}); repair it, or move it away (its pending deliveries are then lost)`);
    }
    db.data = { ...empty(), ...db.data };
    const inStateDir = <T>(write: () => Promise<T>) => inRecreatedDir(stateDir, write, log);
    const delivered = await DeliveredLog.open(join(stateDir, "outbox-delivered.jsonl"), now, inStateDir);
    const acknowledged = Object.keys(db.data.entries).filter((id) => delivered.at(id) !== undefined);
    if (acknowledged.length > 0) {
      for (const id of acknowledged) delete db.data.entries[id];
      await db.write();
    }
    return new OutboxStore(file, db, delivered, inStateDir);
  }

  get data(): Readonly<OutboxData> {
    return this.db.data;
  }

  /** Changes and saves; resolves once the change is on disk. */
  async update(change: (data: OutboxData) => void): Promise<void> {
    change(this.db.data);
    await this.save();
  }

  /** When `id` was acknowledged, if within DELIVERED_KEPT_MS. */
  deliveredAt(id: string): Date | undefined {
    const at = this.delivered.at(id);
    return at === undefined ? undefined : new Date(at);
  }

  /** Records the acknowledgement first, then drops the entry from outbox.json. */
  async markDelivered(id: string, now: Date): Promise<void> {
    delete this.db.data.entries[id];
    await this.delivered.record(id, now);
    await this.save();
  }

  /**
   * One write at a time, and changes made during a write share the next one: JSONFile serialises
   * the whole file on every call, so a burst of deliveries would otherwise serialise it once per
   * change rather than once per write.
   */
  private save(): Promise<void> {
    this.queued ??= this.writing
      .catch(() => {})
      .then(() => {
        this.queued = undefined;
        this.writing = this.inStateDir(() => this.db.write());
        return this.writing;
      });
    return this.queued;
  }
}

/**
 * Acknowledged ids, one JSON line each. Appending keeps the cost of a delivery flat; the file is
 * rewritten with only the ids still kept once it holds more expired lines than kept ones, which
 * spreads that cost over as many deliveries as the rewrite keeps.
 */
class DeliveredLog {
  /** Operations on the file, in order: an append must not land in a file being replaced. */
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly file: string,
    /** id → epoch ms, in the order of acknowledgement (a Map keeps insertion order). */
    private readonly kept: Map<string, number>,
    private lines: number,
    private readonly inStateDir: <T>(write: () => Promise<T>) => Promise<T>,
  ) {}

  static async open(file: string, now: Date, inStateDir: <T>(write: () => Promise<T>) => Promise<T>): Promise<DeliveredLog> {
    let text = "";
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const kept = new Map<string, number>();
    const cutoff = now.getTime() - DELIVERED_KEPT_MS;
    let lines = 0;
    let unreadable = false;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      lines++;
      const record = parseLine(line);
      // Only the last line can be cut short, by a crash mid-append: that acknowledgement never
      // reached the disk, so the entry is still pending and is sent again with the same id.
      if (!record) unreadable = true;
      else if (record.at >= cutoff) kept.set(record.id, record.at);
    }
    const log = new DeliveredLog(file, kept, lines, inStateDir);
    // Rewritten now if a cut-short line would otherwise swallow the next append.
    if (unreadable || lines > kept.size) await log.enqueue(() => log.rewrite());
    return log;
  }

  at(id: string): number | undefined {
    return this.kept.get(id);
  }

  record(id: string, now: Date): Promise<void> {
    const at = now.getTime();
    this.kept.set(id, at);
    for (const [keptId, keptAt] of this.kept) {
      if (keptAt >= at - DELIVERED_KEPT_MS) break;
      this.kept.delete(keptId);
    }
    return this.enqueue(async () => {
      await this.inStateDir(() => appendFile(this.file, `${JSON.stringify({ id, at: new Date(at).toISOString() })}\n`));
      this.lines++;
      if (this.lines - this.kept.size > this.kept.size) await this.rewrite();
    });
  }

  private enqueue(operation: () => Promise<void>): Promise<void> {
    const done = this.queue.then(operation);
    this.queue = done.catch(() => {});
    return done;
  }

  private async rewrite(): Promise<void> {
    const text = [...this.kept].map(([id, at]) => `${JSON.stringify({ id, at: new Date(at).toISOString() })}\n`).join("");
    const temp = `${this.file}.tmp`;
    await this.inStateDir(() => writeFile(temp, text));
    await rename(temp, this.file);
    this.lines = this.kept.size;
  }
}

function parseLine(line: string): { id: string; at: number } | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value !== "object" || value === null) return undefined;
    const { id, at } = value as Record<string, unknown>;
    const time = typeof at === "string" ? Date.parse(at) : NaN;
    return typeof id === "string" && !Number.isNaN(time) ? { id, at: time } : undefined;
  } catch {
    return undefined;
  }
}
