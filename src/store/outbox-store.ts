import { join } from "node:path";
import { silentLogger, type Logger } from "../log.js";
import { Journal, readJournal, type JournalLine } from "./journal.js";
import { DELIVERED_KEPT_MS, emptyOutbox, OUTBOX_FILE, recordShape, type OutboxData, type OutboxRecord } from "./outbox-shapes.js";
import { problemOf, quarantine, type Misfit } from "./quarantine.js";

export {
  DELIVERED_KEPT_MS,
  OUTBOX_FILE,
  type DisabledTarget,
  type OutboxData,
  type OutboxEntry,
  type OutboxRecord,
} from "./outbox-shapes.js";

/** Compaction waits for at least this many superseded records, so a small outbox is not rewritten over and over. */
const COMPACT_AFTER = 10_000;

/** An acknowledgement: when (epoch ms), and after how many attempts when the journal says. */
interface Acknowledged {
  at: number;
  attempts?: number;
}

/** The outbox as its records add up: entries in play, disabled targets, and acknowledged ids (in order). */
class OutboxState {
  readonly data = emptyOutbox();
  readonly delivered = new Map<string, Acknowledged>();
  /** Object.keys(data.entries).length, kept as it changes: counting them per record would make a burst quadratic. */
  private entries = 0;

  /** Applies one record; says why when it does not apply (a record about a delivery it does not know). */
  apply(record: OutboxRecord): string | undefined {
    if (record.op === "queued") {
      if (!this.data.entries[record.entry.id]) this.entries++;
      this.data.entries[record.entry.id] = record.entry;
      return undefined;
    }
    if (record.op === "disabled") {
      this.data.disabledTargets[record.target] = { at: record.at, reason: record.reason };
      return undefined;
    }
    if (record.op === "enabled") {
      delete this.data.disabledTargets[record.target];
      return undefined;
    }
    if (record.op === "delivered") {
      if (this.data.entries[record.id]) this.entries--;
      delete this.data.entries[record.id];
      this.delivered.delete(record.id);
      this.delivered.set(record.id, { at: Date.parse(record.at), ...(record.attempts !== undefined ? { attempts: record.attempts } : {}) });
      return undefined;
    }
    const entry = this.data.entries[record.id];
    if (!entry) return `is about delivery "${record.id}", which is not in the outbox`;
    switch (record.op) {
      case "attempt":
        entry.attempts += 1;
        entry.lastAttemptAt = record.at;
        break;
      case "failed":
        entry.lastError = record.error;
        entry.nextAttemptAt = record.retryAt;
        break;
      case "dead":
        entry.status = "dead";
        entry.lastError = record.error;
        break;
      case "retried":
        entry.status = "pending";
        entry.attempts = 0;
        entry.nextAttemptAt = record.at;
        entry.giveUpAt = record.giveUpAt;
        break;
      case "released":
        delete entry.held;
        entry.nextAttemptAt = record.at;
        entry.giveUpAt = record.giveUpAt;
        break;
      case "purged":
        delete this.data.entries[record.id];
        this.entries--;
        break;
    }
    return undefined;
  }

  /** Forgets acknowledgements older than DELIVERED_KEPT_MS before `now`. */
  expire(now: number): void {
    for (const [keptId, { at }] of this.delivered) {
      if (at >= now - DELIVERED_KEPT_MS) break;
      this.delivered.delete(keptId);
    }
  }

  /** The records a compaction writes: one for each thing still in play. */
  records(): OutboxRecord[] {
    return [
      ...Object.entries(this.data.disabledTargets).map(([target, { at, reason }]): OutboxRecord => ({
        op: "disabled",
        target,
        at,
        reason,
      })),
      ...[...this.delivered].map(([keptId, { at, attempts }]): OutboxRecord => ({
        op: "delivered",
        id: keptId,
        at: new Date(at).toISOString(),
        ...(attempts !== undefined ? { attempts } : {}),
      })),
      ...Object.values(this.data.entries).map((entry): OutboxRecord => ({ op: "queued", entry })),
    ];
  }

  get live(): number {
    return this.entries + Object.keys(this.data.disabledTargets).length + this.delivered.size;
  }

  /** Replays the journal's lines; those that are no record, or do not apply, are returned. */
  static replay(file: string, lines: readonly JournalLine[], now: number): { state: OutboxState; misfits: Misfit[] } {
    const state = new OutboxState();
    const misfits: Misfit[] = [];
    for (const line of lines) {
      const where = `line ${line.line}`;
      if ("broken" in line) {
        misfits.push({ file, where, problem: "is not JSON", value: line.broken });
        continue;
      }
      const parsed = recordShape.safeParse(line.value);
      const problem = parsed.success ? state.apply(parsed.data) : `is no outbox record: ${problemOf(parsed.error)}`;
      if (problem !== undefined) misfits.push({ file, where, problem, value: line.value });
    }
    state.expire(now);
    return { state, misfits };
  }
}

/**
 * The outbox on disk: outbox.jsonl in the state directory, an append-only journal of OutboxRecords,
 * each change synced before it is acted on (group-committed: one synced write carries every change
 * made while the previous one was in flight). It is compacted when the records superseded by
 * later ones outnumber those still in play (and COMPACT_AFTER), so it stays in proportion to what
 * is pending, dead and acknowledged in the last DELIVERED_KEPT_MS, however many runs there were.
 */
export class OutboxStore {
  /** Records in the file since it was last written whole. */
  private records: number;

  private constructor(
    readonly file: string,
    private readonly state: OutboxState,
    private readonly journal: Journal,
    records: number,
  ) {
    this.records = records;
  }

  /**
   * `parent`: the logger whose child reports records moved aside and a state directory removed
   * while countd runs (it is created again). A line that is no record, or does not apply, is moved
   * to the quarantine file and the others are delivered as usual.
   */
  static async open(stateDir: string, now: Date, parent: Logger = silentLogger): Promise<OutboxStore> {
    const log = parent.child({ component: "outbox-store" });
    const file = join(stateDir, OUTBOX_FILE);
    let state: OutboxState | undefined;
    const { journal, lines } = await Journal.open(file, () => state!.records(), log);
    const replayed = OutboxState.replay(file, lines, now.getTime());
    state = replayed.state;
    await quarantine(stateDir, replayed.misfits, log);
    const store = new OutboxStore(file, state, journal, lines.length);
    if (replayed.misfits.length > 0 || store.superseded()) {
      await journal.compact();
      store.records = state.live;
    }
    return store;
  }

  /** What the journal in `stateDir` adds up to, read without writing: for `countd outbox` beside a running daemon. */
  static async read(stateDir: string, now: Date): Promise<OutboxData> {
    const file = join(stateDir, OUTBOX_FILE);
    return OutboxState.replay(file, (await readJournal(file)).lines, now.getTime()).state.data;
  }

  get data(): Readonly<OutboxData> {
    return this.state.data;
  }

  isDelivered(id: string): boolean {
    return this.state.delivered.has(id);
  }

  /** When `id` was acknowledged, if within DELIVERED_KEPT_MS. */
  deliveredAt(id: string): Date | undefined {
    const acknowledged = this.state.delivered.get(id);
    return acknowledged === undefined ? undefined : new Date(acknowledged.at);
  }

  /** The acknowledged ids starting with `prefix`, with when and after how many attempts, oldest first. */
  deliveredWith(prefix: string): Array<{ id: string; at: Date; attempts?: number }> {
    const found: Array<{ id: string; at: Date; attempts?: number }> = [];
    for (const [id, { at, attempts }] of this.state.delivered)
      if (id.startsWith(prefix)) found.push({ id, at: new Date(at), ...(attempts !== undefined ? { attempts } : {}) });
    return found;
  }

  /**
   * Applies the records at once (so the outbox reads them from now on) and resolves once they are
   * synced. A record that does not apply is a bug in the caller, and throws before anything is written.
   */
  record(...records: OutboxRecord[]): Promise<void> {
    for (const record of records) {
      const problem = this.state.apply(record);
      if (problem !== undefined) throw new Error(`outbox record ${JSON.stringify(record.op)} ${problem}`);
      if (record.op === "delivered") this.state.expire(Date.parse(record.at));
    }
    this.records += records.length;
    if (!this.superseded()) return this.journal.append(records);
    this.records = this.state.live;
    return this.journal.compact();
  }

  /** The journal's last write failed: what is in memory is not all on disk. */
  get inDoubt(): boolean {
    return this.journal.inDoubt;
  }

  /** Waits for the writes in flight and closes the journal. */
  close(): Promise<void> {
    return this.journal.close();
  }

  private superseded(): boolean {
    const live = this.state.live;
    return this.records - live > Math.max(live, COMPACT_AFTER);
  }
}
