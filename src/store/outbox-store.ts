import { appendFile, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Low } from "lowdb";
import { z } from "zod";
import type { DeliveryMessage } from "../delivery/message.js";
import { WEBHOOK_FORMATS, type DeliveryTarget } from "../delivery/targets.js";
import { silentLogger, type Logger } from "../log.js";
import { RUN_REASONS, RUN_STATUSES } from "./run-record.js";
import { count, fitEach, isoTime as time, isPlainObject, kind, quarantine, readJsonFile, type Misfit } from "./quarantine.js";
import { usageShape } from "./run-history.js";
import { inRecreatedDir } from "./writable-dir.js";
import { DurableJSONFile } from "./durable.js";

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

const strings = z.array(z.string());
const targetShape = z.discriminatedUnion("kind", [
  z.looseObject({ kind: z.literal("email"), to: strings, cc: strings, bcc: strings, subject: z.string().optional(), attach: strings }),
  z.looseObject({
    kind: z.literal("webhook"),
    url: z.string(),
    secret: z.string().optional(),
    format: z.enum(WEBHOOK_FORMATS),
    headers: z.record(z.string(), z.string()),
  }),
]) satisfies z.ZodType<DeliveryTarget>;
const messageShape = z.looseObject({
  kind: z.enum(["run.completed", "run.failed", "run.recovered", "heartbeat"]),
  job: z.string(),
  run: z.looseObject({
    id: z.string(),
    reason: z.enum(RUN_REASONS),
    status: z.enum(RUN_STATUSES),
    startedAt: time,
    finishedAt: time,
    durationMs: z.number(),
    usage: usageShape,
  }),
  result: z.string(),
  error: z.string().optional(),
  lastToolCalls: z.array(z.looseObject({ name: z.string(), status: z.enum(["ok", "error"]), summary: z.string() })).optional(),
  failing: z.looseObject({ since: time, failures: z.number().int().nonnegative(), unreported: z.number().int().nonnegative() }).optional(),
}) satisfies z.ZodType<DeliveryMessage>;
/** An entry as the outbox writes it: every field the senders and the retry schedule read. */
const entryShape = z.looseObject({
  id: z.string().min(1),
  target: targetShape,
  message: messageShape,
  workspace: z.string(),
  createdAt: time,
  giveUpAt: time,
  attempts: count,
  lastAttemptAt: time.optional(),
  nextAttemptAt: time,
  status: z.enum(["pending", "dead"]),
  lastError: z.string().optional(),
}) satisfies z.ZodType<OutboxEntry>;
const disabledShape = z.looseObject({ at: time, reason: z.string() }) satisfies z.ZodType<DisabledTarget>;

/** outbox.json's content as the outbox can use it; each entry and disabled target checked on its own. */
function fitOutbox(read: { value: unknown } | undefined, file: string): { data: OutboxData; misfits: Misfit[] } {
  const data = empty();
  const misfits: Misfit[] = [];
  if (read === undefined) return { data, misfits };
  if (!isPlainObject(read.value)) {
    misfits.push({ file, where: "the whole file", problem: `does not fit: expected an object of deliveries, got ${kind(read.value)}`, value: read.value });
    return { data, misfits };
  }
  for (const [key, value] of Object.entries(read.value)) {
    if (key === "entries") {
      for (const [id, entry] of Object.entries(fitEach(entryShape, value, file, key, misfits))) {
        if (entry.id === id) data.entries[id] = entry;
        else misfits.push({ file, where: `entries.${id}`, problem: `does not fit: its id is "${entry.id}"`, value: entry });
      }
    } else if (key === "disabledTargets") {
      data.disabledTargets = fitEach(disabledShape, value, file, key, misfits);
    } else {
      misfits.push({ file, where: key, problem: "is not a part of the outbox", value });
    }
  }
  return { data, misfits };
}

/**
 * The outbox on disk, in two files of the state directory:
 * - outbox.json (lowdb, rewritten and synced on each change, DurableJSONFile) holds only what is still in play,
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

  /**
   * `parent`: the logger whose child reports pieces moved aside and a state directory removed
   * while countd runs (it is created again). An entry or line that does not fit is moved to the
   * quarantine file, and the others are delivered as usual; a file that is not JSON at all is refused.
   */
  static async open(stateDir: string, now: Date, parent: Logger = silentLogger): Promise<OutboxStore> {
    const log = parent.child({ component: "outbox-store" });
    await mkdir(stateDir, { recursive: true });
    const file = join(stateDir, "outbox.json");
    const read = await readJsonFile(file, "outbox file", "repair it, or move it away (its pending deliveries are then lost)");
    const { data, misfits } = fitOutbox(read, file);
    const db = new Low(new DurableJSONFile<OutboxData>(file), data);
    await quarantine(stateDir, misfits, log);
    const inStateDir = <T>(write: () => Promise<T>) => inRecreatedDir(stateDir, write, log);
    const delivered = await DeliveredLog.open(join(stateDir, "outbox-delivered.jsonl"), now, inStateDir, (lines) => quarantine(stateDir, lines, log));
    const acknowledged = Object.keys(db.data.entries).filter((id) => delivered.at(id) !== undefined);
    for (const id of acknowledged) delete db.data.entries[id];
    if (acknowledged.length > 0 || misfits.length > 0) await db.write();
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
   * One write at a time, and changes made during a write share the next one: the adapter serialises
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

  /** `moveAside`: where the lines that are no acknowledgement go, before the rewrite that drops them. */
  static async open(
    file: string,
    now: Date,
    inStateDir: <T>(write: () => Promise<T>) => Promise<T>,
    moveAside: (misfits: Misfit[]) => Promise<void>,
  ): Promise<DeliveredLog> {
    let text = "";
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const kept = new Map<string, number>();
    const cutoff = now.getTime() - DELIVERED_KEPT_MS;
    let lines = 0;
    const misfits: Misfit[] = [];
    for (const [index, line] of text.split("\n").entries()) {
      if (line === "") continue;
      lines++;
      const record = parseLine(line);
      // A crash mid-append cuts the last line short: that acknowledgement never reached the disk,
      // so the entry is still pending and is sent again with the same id.
      if (!record) misfits.push({ file, where: `line ${index + 1}`, problem: "is no acknowledgement ({id, at})", value: line });
      else if (record.at >= cutoff) kept.set(record.id, record.at);
    }
    const log = new DeliveredLog(file, kept, lines, inStateDir);
    await moveAside(misfits);
    // Rewritten now if a cut-short line would otherwise swallow the next append.
    if (misfits.length > 0 || lines > kept.size) await log.enqueue(() => log.rewrite());
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
