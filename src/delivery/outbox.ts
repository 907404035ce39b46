import type { CountdEvents, EventBus } from "../events.js";
import { silentLogger, type Logger } from "../log.js";
import TinyQueue from "tinyqueue";
import { OutboxStore, type OutboxEntry, type OutboxRecord } from "../store/outbox-store.js";
import { DELIVERED_KEPT_MS } from "../store/outbox-shapes.js";
import { errorText } from "../text.js";
import { DeliveryError } from "./errors.js";
import type { DeliveryMessage } from "./message.js";
import { GIVE_UP_AFTER_MS, RETRY_DELAYS_MS, retryDelayMs } from "./schedule.js";
import { describeTarget, targetKey, type DeliveryTarget } from "./targets.js";
import type { DeliveryOutbox, SendFn, Settled } from "./delivery-outbox.js";

export type { OutboxEntry } from "../store/outbox-store.js";
export type { SendFn, Settled } from "./delivery-outbox.js";

export interface OutboxOptions {
  stateDir: string;
  send: SendFn;
  now?: () => Date;
  log?: Logger;
  /** In [0, 1), for the retry jitter. */
  random?: () => number;
  /** Where each change to a delivery is told, once the journal holds it (the console's live view). */
  events?: EventBus;
}

/** Attempts in flight at once, across all targets; a single entry never has two. */
export const CONCURRENCY = 4;
/**
 * The loop's longest sleep. Attempt times are wall-clock while timers are not (a suspended
 * machine, a clock change), so the loop looks again at least this often.
 */
const MAX_SLEEP_MS = 60_000;

const iso = (ms: number) => new Date(ms).toISOString();

interface SettleWaiter {
  ids: readonly string[];
  /** ids before it are settled: deliveries settle roughly in the order queued, so each check starts where the last stopped. */
  next: number;
  resolve: (settled: Settled[]) => void;
}

/**
 * Durable delivery: every message is on disk before its first attempt, retried on the schedule
 * in schedule.ts until acknowledged or given up, and never sent again once acknowledged. One
 * outbox per state directory (the daemon's lock file ensures it).
 */
/** A delivery's idempotency id: the same run and target give the same id, on every attempt. */
export function deliveryId(runKey: string, target: DeliveryTarget): string {
  return `${runKey}.${targetKey(target)}`;
}

interface Due {
  at: number;
  entry: OutboxEntry;
}

export class Outbox implements DeliveryOutbox {
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Send slots taken: an attempt holds one from its start until its outcome is appended to the journal. */
  private slots = 0;
  private readonly settleWaiters = new Set<SettleWaiter>();
  /** Pending entries by their next attempt, earliest first; an entry whose time changed is pushed again, and the old item skipped. */
  private readonly due = new TinyQueue<Due>([], (a, b) => a.at - b.at);
  private started = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly store: OutboxStore,
    private readonly send: SendFn,
    private readonly now: () => Date,
    private readonly log: Logger,
    private readonly random: () => number,
    private readonly events: EventBus | undefined,
  ) {
    for (const entry of Object.values(store.data.entries)) this.schedule(entry);
  }

  static async open(opts: OutboxOptions): Promise<Outbox> {
    const now = opts.now ?? (() => new Date());
    const log = opts.log ?? silentLogger;
    const store = await OutboxStore.open(opts.stateDir, now(), log);
    return new Outbox(store, opts.send, now, log.child({ component: "outbox" }), opts.random ?? Math.random, opts.events);
  }

  /**
   * Queues `message` for each target, on disk before returning; returns the delivery ids
   * `<runKey>.<targetKey>`, one per target. A delivery already queued, dead or delivered (the same
   * run to the same target) is not queued again. A disabled target gets a dead entry saying why.
   *
   * @param runKey names the run across all jobs: pass `${job}.${runId}` (run ids are unique only
   *   within a job). With job names of `[a-z0-9._-]` and run ids like `20261130T090000Z-3f2a`, the
   *   delivery id is a dot-atom, so it is the webhook-id and Message-ID's left part as it is
   *   (`<id@countd>`); no ":" (which a Message-ID's left part cannot hold).
   */
  async enqueue(
    runKey: string,
    targets: readonly DeliveryTarget[],
    message: DeliveryMessage,
    workspace: string,
    held?: string,
  ): Promise<string[]> {
    const now = this.now().getTime();
    const ids: string[] = [];
    const written: Promise<void>[] = [];
    for (const target of targets) {
      const id = deliveryId(runKey, target);
      ids.push(id);
      if (this.store.data.entries[id] || this.store.isDelivered(id)) continue;
      const disabled = this.store.data.disabledTargets[targetKey(target)];
      const entry: OutboxEntry = {
        id,
        target,
        message,
        workspace,
        createdAt: iso(now),
        giveUpAt: iso(now + GIVE_UP_AFTER_MS),
        attempts: 0,
        nextAttemptAt: iso(now),
        status: disabled ? "dead" : "pending",
        ...(disabled ? { lastError: disabled.reason } : {}),
        ...(held !== undefined && !disabled ? { held } : {}),
      };
      written.push(this.record({ op: "queued", entry }));
      if (disabled) this.log.warn({ delivery: id, target: targetKey(target), error: disabled.reason }, "delivery not sent");
      else this.schedule(entry);
    }
    await Promise.all(written);
    if (this.started) this.wake();
    return ids;
  }

  /** Attempts due deliveries from now on: at once, then on a timer. */
  start(): void {
    this.started = true;
    this.wake();
  }

  /** Stops the timer and waits for the attempts in flight to be recorded. */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    while (this.inFlight.size > 0) await Promise.all(this.inFlight.values());
  }

  /** Stops, then closes the journal once every change is synced. */
  async close(): Promise<void> {
    await this.stop();
    await this.store.close();
  }

  /**
   * Attempts every delivery due now, and resolves when none is in flight: for a one-off command,
   * or to step an outbox that was not started.
   */
  async runDue(): Promise<void> {
    for (;;) {
      this.fill();
      if (this.inFlight.size === 0) return;
      await Promise.race(this.inFlight.values());
    }
  }

  /**
   * Resolves once every one of `ids` is delivered or dead, as the send loop records it; an id the
   * outbox does not know counts as dead. Nothing times out here: the caller decides how long to wait.
   */
  settled(ids: readonly string[]): Promise<Settled[]> {
    return new Promise((resolve) => {
      const waiter = { ids, next: 0, resolve };
      this.settleWaiters.add(waiter);
      this.notifySettled();
    });
  }

  /** Pending and dead deliveries, oldest first. */
  list(): { pending: Readonly<OutboxEntry>[]; dead: Readonly<OutboxEntry>[] } {
    const entries = Object.values(this.store.data.entries).sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
    return { pending: entries.filter((e) => e.status === "pending"), dead: entries.filter((e) => e.status === "dead") };
  }

  counts(): { pending: number; dead: number } {
    const { pending, dead } = this.list();
    return { pending: pending.length, dead: dead.length };
  }

  /** When a delivery was acknowledged, if within the last 7 days. */
  deliveredAt(id: string): Date | undefined {
    return this.store.deliveredAt(id);
  }

  /**
   * Makes one delivery (by id), or every dead one ("dead"), due now with a fresh schedule and a
   * fresh 24 h; its target is enabled again. Returns how many. An unknown or delivered id throws.
   */
  async retry(which: string): Promise<number> {
    const chosen = which === "dead" ? this.list().dead : [this.entry(which)];
    const now = this.now().getTime();
    const records: OutboxRecord[] = chosen.map(({ id }) => ({ op: "retried", id, at: iso(now), giveUpAt: iso(now + GIVE_UP_AFTER_MS) }));
    const targets = new Set(chosen.map((entry) => targetKey(entry.target)));
    for (const target of targets) if (this.store.data.disabledTargets[target]) records.push({ op: "enabled", target });
    await this.record(...records);
    for (const { id } of chosen) this.schedule(this.store.data.entries[id]!);
    if (this.started) this.wake();
    return chosen.length;
  }

  /** Makes a held delivery due now, with a fresh 24 h (a review may take most of the first). */
  async release(id: string): Promise<void> {
    const entry = this.entry(id);
    if (entry.held === undefined) throw new Error(`delivery ${id} is not held (it is ${entry.status}); only a held delivery is released`);
    const now = this.now().getTime();
    await this.record({ op: "released", id, at: iso(now), giveUpAt: iso(now + GIVE_UP_AFTER_MS) });
    this.schedule(entry);
    if (this.started) this.wake();
  }

  /** Forgets dead deliveries; returns how many. */
  async purge(): Promise<number> {
    const dead = this.list().dead;
    if (dead.length > 0) await this.record(...dead.map(({ id }): OutboxRecord => ({ op: "purged", id })));
    return dead.length;
  }

  /** Keys (targetKey) of targets that answered HTTP 410: nothing is sent to them until a retry. */
  disabledTargets(): string[] {
    return Object.keys(this.store.data.disabledTargets);
  }

  /**
   * Sends to every disabled target again from now on (`why` is logged, e.g. "SIGHUP"); returns
   * their keys. Deliveries already dead stay dead: `countd outbox retry` sends them again.
   */
  async enableTargets(why: string): Promise<string[]> {
    const keys = this.disabledTargets();
    if (keys.length === 0) return keys;
    await this.record(...keys.map((target): OutboxRecord => ({ op: "enabled", target })));
    for (const key of keys) {
      this.log.info({ target: key, why }, "delivery target enabled again; its dead deliveries are sent again by `countd outbox retry`");
    }
    return keys;
  }

  private entry(id: string): OutboxEntry {
    const entry = this.store.data.entries[id];
    if (entry) return entry;
    const deliveredAt = this.store.deliveredAt(id);
    if (deliveredAt)
      throw new Error(`delivery ${id} was acknowledged at ${deliveredAt.toISOString()}; a delivered message is not sent again`);
    throw new Error(`no pending or dead delivery with id "${id}" in ${this.store.file}`);
  }

  /** Acknowledged deliveries whose id starts with `prefix` (a run's `<job>.<run id>.`), with when and their attempts; those of the last DELIVERED_KEPT_MS only. */
  deliveredIds(prefix: string): Array<{ id: string; at: string; attempts?: number }> {
    // Expired ids leave the store only as it records or reopens: a quiet outbox still holds them.
    const since = this.now().getTime() - DELIVERED_KEPT_MS;
    return this.store
      .deliveredWith(prefix)
      .filter(({ at }) => at.getTime() >= since)
      .map(({ id, at, attempts }) => ({ id, at: at.toISOString(), ...(attempts !== undefined ? { attempts } : {}) }));
  }

  /** Writes through the store, then tells the bus of each delivery the records changed. */
  private async record(...records: OutboxRecord[]): Promise<void> {
    const before = records.map((record) =>
      record.op === "queued" ? record.entry : "id" in record ? this.store.data.entries[record.id] : undefined,
    );
    const written = this.store.record(...records);
    if (!this.events) return written;
    await written;
    records.forEach((record, i) => {
      const entry = "id" in record ? (this.store.data.entries[record.id] ?? before[i]) : before[i];
      if (entry) this.events!.emit("delivery", deliveryEvent(record, entry));
    });
  }

  private wake(): void {
    this.notifySettled();
    this.fill();
    this.arm();
  }

  private notifySettled(): void {
    for (const waiter of this.settleWaiters) {
      while (waiter.next < waiter.ids.length && this.settledAs(waiter.ids[waiter.next]!)) waiter.next++;
      if (waiter.next < waiter.ids.length) continue;
      const settled = waiter.ids.map((id) => this.settledAs(id));
      // One retried since it settled: wait for it again.
      if (settled.some((s) => s === undefined)) {
        waiter.next = 0;
        continue;
      }
      this.settleWaiters.delete(waiter);
      waiter.resolve(settled as Settled[]);
    }
  }

  /** Undefined while the delivery is still pending. */
  private settledAs(id: string): Settled | undefined {
    if (this.store.isDelivered(id)) return this.inFlight.has(id) ? undefined : { id, delivered: true };
    const entry = this.store.data.entries[id];
    if (entry?.status === "pending") return undefined;
    return { id, delivered: false, error: entry?.lastError ?? (entry ? "dead" : `no delivery with id "${id}"`) };
  }

  /** A held entry falls due only at its give-up time, when it is marked dead unless released. */
  private schedule(entry: OutboxEntry): void {
    const at = Date.parse(entry.held === undefined ? entry.nextAttemptAt : entry.giveUpAt);
    if (entry.status === "pending") this.due.push({ at, entry });
  }

  /** The earliest pending entry not in flight, dropping items whose entry moved on since they were pushed. */
  private peek(): Due | undefined {
    for (let item = this.due.peek(); item; item = this.due.peek()) {
      const { entry, at } = item;
      const due = Date.parse(entry.held === undefined ? entry.nextAttemptAt : entry.giveUpAt);
      const current = this.store.data.entries[entry.id] === entry && entry.status === "pending" && due === at;
      if (current && !this.inFlight.has(entry.id)) return item;
      this.due.pop();
    }
    return undefined;
  }

  /**
   * Starts attempts for due entries, oldest due first, up to CONCURRENCY send slots taken. An
   * attempt hands its slot on as its outcome is appended, and the next attempt in it sends once
   * its own start is synced: in the same write as that outcome. So a send starts only after the
   * outcome of the send before it in its slot is on disk, and a crash can make countd send again
   * (under the same ids) at most CONCURRENCY deliveries the receivers had already taken; and one
   * synced write carries an outcome and the next start in each slot.
   */
  private fill(): void {
    const now = this.now().getTime();
    for (let item = this.peek(); item && item.at <= now && this.slots < CONCURRENCY; item = this.peek()) {
      this.due.pop();
      const { entry } = item;
      this.slots++;
      let held = true;
      const release = () => {
        if (!held) return;
        held = false;
        this.slots--;
        if (this.started) this.fill();
      };
      const attempt = this.attempt(entry, release)
        .catch((err: unknown) => {
          // The outbox file could not be written (disk full?): the next try waits, rather than spinning.
          this.log.error({ delivery: entry.id, file: this.store.file, error: errorText(err) }, "could not record a delivery attempt");
          entry.nextAttemptAt = iso(this.now().getTime() + RETRY_DELAYS_MS[0]);
        })
        .finally(() => {
          release();
          this.inFlight.delete(entry.id);
          this.schedule(entry);
          if (this.started) this.wake();
          else this.notifySettled();
        });
      this.inFlight.set(entry.id, attempt);
    }
  }

  /** Sleeps until the next entry falls due; with every slot busy, a finishing attempt wakes the loop instead. */
  private arm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.started || this.slots >= CONCURRENCY) return;
    const next = this.peek()?.at;
    if (next === undefined) return;
    this.timer = setTimeout(() => this.wake(), Math.min(Math.max(next - this.now().getTime(), 0), MAX_SLEEP_MS));
    // The daemon's other work keeps the process alive; a one-off command may exit with deliveries pending.
    this.timer.unref();
  }

  /** `release` hands the send slot on; called once the outcome is appended, before it is synced. */
  private async attempt(entry: OutboxEntry, release: () => void): Promise<void> {
    if (entry.held !== undefined) {
      await this.record({ op: "dead", id: entry.id, error: `held and never released; gave up after 24 h (${entry.held})` });
      this.log.warn({ delivery: entry.id }, "held delivery gave up after 24 h");
      return;
    }
    const disabled = this.store.data.disabledTargets[targetKey(entry.target)];
    if (disabled) {
      await this.record({ op: "dead", id: entry.id, error: disabled.reason });
      return;
    }
    // Synced before the send, so a crash mid-send still counts the attempt; when this attempt took
    // the slot of one that just ended, in the same write as that one's outcome.
    await this.record({ op: "attempt", id: entry.id, at: this.now().toISOString() });
    let failure: { err: unknown } | undefined;
    try {
      await this.send(entry);
    } catch (err) {
      failure = { err };
    }
    const outcome = failure
      ? this.recordFailure(entry, failure.err)
      : this.record({ op: "delivered", id: entry.id, at: this.now().toISOString(), attempts: entry.attempts });
    release();
    await outcome;
    if (!failure) this.log.info({ delivery: entry.id, attempts: entry.attempts }, "delivered");
  }

  private async recordFailure(entry: OutboxEntry, err: unknown): Promise<void> {
    const failure = err instanceof DeliveryError ? err : undefined;
    const reason = errorText(err);
    const now = this.now().getTime();
    const fields = { delivery: entry.id, target: targetKey(entry.target), attempts: entry.attempts, error: reason };
    if (failure?.disableTarget) {
      const key = targetKey(entry.target);
      const disabled = { at: iso(now), reason: `target disabled after HTTP ${failure.status ?? 410}` };
      const others = Object.values(this.store.data.entries).filter(
        (other) => other !== entry && other.status === "pending" && !this.inFlight.has(other.id) && targetKey(other.target) === key,
      );
      await this.record(
        { op: "disabled", target: key, ...disabled },
        { op: "dead", id: entry.id, error: reason },
        ...others.map((other): OutboxRecord => ({ op: "dead", id: other.id, error: disabled.reason })),
      );
      this.log.warn(
        fields,
        "delivery target disabled; nothing more is sent to it until its URL changes in the job file, SIGHUP, or `countd outbox retry`",
      );
      return;
    }
    if (failure?.permanent) {
      await this.record({ op: "dead", id: entry.id, error: reason });
      this.log.warn(fields, "delivery failed for good");
      return;
    }
    const next = now + retryDelayMs(entry.attempts, this.random, failure?.retryAfterMs);
    if (next > Date.parse(entry.giveUpAt)) {
      await this.record({ op: "dead", id: entry.id, error: `gave up after 24 h: ${reason}` });
      this.log.warn(fields, "delivery gave up after 24 h");
      return;
    }
    await this.record({ op: "failed", id: entry.id, error: reason, retryAt: iso(next) });
    this.log.info({ ...fields, retryAt: iso(next) }, "delivery failed, retrying later");
  }
}

/** What the bus hears of one record about one delivery. */
function deliveryEvent(record: OutboxRecord, entry: Readonly<OutboxEntry>): CountdEvents["delivery"] {
  const queued = entry.status === "dead" ? "dead" : entry.held !== undefined ? "held" : "queued";
  const status = record.op === "queued" ? queued : record.op === "attempt" ? "sending" : record.op;
  return {
    id: entry.id,
    status: status as CountdEvents["delivery"]["status"],
    attempts: entry.attempts,
    target: targetKey(entry.target),
    to: describeTarget(entry.target),
    kind: entry.target.kind,
    ...(entry.lastError !== undefined && (status === "failed" || status === "dead") ? { error: entry.lastError } : {}),
    ...(status === "failed" || status === "retried" ? { nextAttemptAt: entry.nextAttemptAt } : {}),
  };
}
