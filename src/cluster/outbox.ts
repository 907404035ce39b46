import { setTimeout as sleep } from "node:timers/promises";
import { Queue, UnrecoverableError, Worker, type Job as QueuedJob, type JobType } from "bullmq";
import type { Redis } from "ioredis";
import type { DeliveryOutbox, SendFn, Settled } from "../delivery/delivery-outbox.js";
import { DeliveryError } from "../delivery/errors.js";
import type { DeliveryMessage } from "../delivery/message.js";
import { CONCURRENCY, deliveryId } from "../delivery/outbox.js";
import { GIVE_UP_AFTER_MS, RETRY_DELAYS_MS, retryDelayMs } from "../delivery/schedule.js";
import { describeTarget, targetKey, type DeliveryTarget } from "../delivery/targets.js";
import type { CountdEvents, EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { RunStatus } from "../store/run-record.js";
import { DELIVERED_KEPT_MS, type DisabledTarget, type OutboxEntry } from "../store/outbox-shapes.js";
import { errorText } from "../text.js";
import type { ClusterConfig } from "../config/schema.js";
import { commandRedis } from "./command-redis.js";
import { lostConnection } from "./redis.js";
import { HOLD_MS, holdOptions } from "./fires.js";
import { ownEntry, type OwnDeliveries } from "../delivery/own-deliveries.js";
import { LET_GO_MS, settlesWithin } from "./settle.js";
import { dataShape, entryOf, jobOptions, parseDisabled, type DeliveryData } from "./outbox-entries.js";

/** BullMQ's key prefix, as the fire queues': `countd:deliveries:…`. */
const PREFIX = "countd";
const QUEUE = "deliveries";
/** Acknowledged ids by when (epoch ms), and the same ids by name (all scored 0) for a run's prefix. */
const ACKED_AT = "countd:outbox:acked";
const ACKED_IDS = "countd:outbox:acked-ids";
/** Targets that answered HTTP 410, by target key → DisabledTarget as JSON. */
const DISABLED = "countd:outbox:disabled";

/** A sender killed mid-send leaves its delivery active; it is sent again by another daemon, however often that happens. */
const MAX_STALLS = 1_000;
/** How often settled() and runDue() look again. */
const POLL_MS = 200;
/** Deliveries settled() asks about at once. */
const POLL_BATCH = 200;
/** Acknowledgements past DELIVERED_KEPT_MS forgotten per acknowledgement, so each stays one short script. */
const EXPIRE_PER_ACK = 100;

/** The states of a delivery about to be attempted, or being attempted. */
const DUE: string[] = ["waiting", "prioritized", "active"];
/** Every state of a delivery not yet acknowledged nor given up. */
const PENDING: JobType[] = ["waiting", "delayed", "active", "prioritized", "waiting-children"];

/** Records the acknowledgement (the first time stays) and forgets those older than the cut-off. */
const ACK = `
redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
if #old > 0 then
  redis.call('ZREM', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end
`;

/** A failed attempt that is tried again after `delayMs` (countd's schedule); what BullMQ's backoff reads. */
class RetryLater extends Error {
  override readonly name = "RetryLater";
  constructor(
    reason: string,
    readonly delayMs: number,
  ) {
    super(reason);
  }
}

export interface ClusterOutboxOptions {
  /** A `queues` connection (redis.ts): commands wait while Redis is away, so nothing queued is lost. */
  redis: Redis;
  send: SendFn;
  /** The node's own jobs' targets and workspace: what a delivery read from Redis is sent to and with. */
  own: OwnDeliveries;
  /** Where each change this daemon makes to a delivery is told (the console's live view). */
  events?: EventBus;
  /** How long a hold on a delivery being sent lasts unless renewed (cluster.hold); HOLD_MS if not given. */
  holdMs?: number;
  log?: Logger;
  /** Quits `redis` on close: the connection is the outbox's own (a command's). */
  ownsConnection?: boolean;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The cluster's outbox: one BullMQ queue, `deliveries`, in place of each daemon's journal. A
 * delivery's id is its BullMQ job id, so a delivery queued twice (the same run to the same target)
 * is one job; every daemon's worker takes due deliveries (CONCURRENCY at a time, as a daemon's own
 * outbox attempts them), so one is sent by one daemon and, after a failure, retried by whichever
 * takes it next: BullMQ's custom backoff waits as schedule.ts says, and a failure past the 24 h, a
 * permanent one or a target gone (HTTP 410) makes it failed, which is dead here, until `countd
 * outbox retry` or `purge`. A daemon killed mid-send loses its lock; another takes the delivery.
 *
 * Acknowledged ids are kept in Redis for DELIVERED_KEPT_MS as a daemon keeps them in its journal,
 * and a worker looks there before sending, so an acknowledged delivery is not sent again even if
 * its daemon died before BullMQ marked it completed; the completed job is kept as long, so the same
 * id queued again meanwhile stays one job.
 */
export class ClusterOutbox implements DeliveryOutbox {
  private readonly queue: Queue;
  private readonly log: Logger;
  private worker: Worker | undefined;
  /** Ids this process queued or retried: what runDue() waits for. */
  private readonly mine = new Set<string>();

  constructor(private readonly opts: ClusterOutboxOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "outbox" });
    this.queue = new Queue(QUEUE, { connection: opts.redis, prefix: PREFIX });
    this.queue.on("error", (err) => this.error("cluster queue error", err));
  }

  async enqueue(
    runKey: string,
    targets: readonly DeliveryTarget[],
    message: DeliveryMessage,
    workspace: string,
    held?: string,
  ): Promise<string[]> {
    const now = Date.now();
    // A held delivery is a job delayed until its give-up time, when deliver() marks it dead; release() promotes it.
    const hold = held === undefined ? {} : { delay: GIVE_UP_AFTER_MS };
    const jobs = targets.map((target) => {
      const data: DeliveryData = {
        target,
        message,
        workspace,
        createdAt: iso(now),
        giveUpAt: iso(now + GIVE_UP_AFTER_MS),
        ...(held ? { held } : {}),
      };
      return { name: message.job, data, opts: { jobId: deliveryId(runKey, target), ...jobOptions(), ...hold } };
    });
    if (jobs.length === 0) return [];
    // One MULTI: a job id already in the queue (waiting, dead or acknowledged) is left as it is.
    await this.queue.addBulk(jobs);
    const ids = jobs.map((job) => job.opts.jobId);
    for (const [i, id] of ids.entries()) {
      if (held === undefined) this.mine.add(id);
      const target = targets[i]!;
      this.tell({
        id,
        status: held === undefined ? "queued" : "held",
        attempts: 0,
        target: targetKey(target),
        to: describeTarget(target),
        kind: target.kind,
      });
    }
    return ids;
  }

  start(): void {
    if (this.worker) return;
    this.worker = new Worker(QUEUE, (job) => this.deliver(job), {
      connection: this.opts.redis,
      prefix: PREFIX,
      concurrency: CONCURRENCY,
      ...holdOptions(this.opts.holdMs ?? HOLD_MS),
      maxStalledCount: MAX_STALLS,
      settings: { backoffStrategy: (_attempts, _type, err) => (err instanceof RetryLater ? err.delayMs : RETRY_DELAYS_MS[0]) },
    });
    this.worker.on("error", (err) => this.error("cluster worker error", err));
  }

  /** While Redis is away every command fails: connectRedis has said so once, and these would say it again and again. */
  private error(msg: string, err: Error): void {
    if (!lostConnection(err)) this.log.error({ queue: QUEUE, error: errorText(err) }, msg);
  }

  async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.close();
  }

  /**
   * Stops sending and lets go of the queue. BullMQ's commands wait for Redis, so while it is away
   * this waits LET_GO_MS at most: the deliveries this daemon took stay held until their hold
   * expires and another daemon sends them; none is lost.
   */
  async close(): Promise<void> {
    const closed = this.stop().then(() => this.queue.close());
    if (!(await settlesWithin(closed, LET_GO_MS))) {
      this.log.warn(
        { waitedMs: LET_GO_MS },
        "Redis did not answer: stopping without handing back the deliveries taken; another daemon sends them once their hold expires",
      );
      if (this.opts.ownsConnection) this.opts.redis.disconnect();
      return;
    }
    if (this.opts.ownsConnection) await this.opts.redis.quit().catch(() => this.opts.redis.disconnect());
  }

  /** Takes due deliveries too, until each this process queued or retried was attempted (or settled). */
  async runDue(): Promise<void> {
    const started = !this.worker;
    this.start();
    try {
      for (;;) {
        const states = await Promise.all([...this.mine].map((id) => this.queue.getJobState(id)));
        if (!states.some((state) => DUE.includes(state))) return;
        await sleep(POLL_MS);
      }
    } finally {
      if (started) await this.stop();
    }
  }

  async settled(ids: readonly string[]): Promise<Settled[]> {
    const found = new Map<string, Settled>();
    // Deliveries settle roughly in the order queued: each look starts at the first not settled.
    let next = 0;
    for (;;) {
      while (next < ids.length) {
        const batch = ids.slice(next, next + POLL_BATCH);
        const answers = await Promise.all(batch.map((id) => (found.has(id) ? found.get(id) : this.settledAs(id))));
        answers.forEach((answer, i) => answer && found.set(batch[i]!, answer));
        if (answers.some((answer) => answer === undefined)) break;
        next += batch.length;
      }
      if (next >= ids.length) return ids.map((id) => found.get(id)!);
      await sleep(POLL_MS);
    }
  }

  async list(): Promise<{ pending: OutboxEntry[]; dead: OutboxEntry[] }> {
    const [pending, dead] = await Promise.all([this.entries(PENDING, "pending"), this.entries(["failed"], "dead")]);
    return { pending, dead };
  }

  async counts(): Promise<{ pending: number; dead: number }> {
    const counts = await this.queue.getJobCounts(...PENDING, "failed");
    const pending = PENDING.reduce((sum, state) => sum + (counts[state] ?? 0), 0);
    return { pending, dead: counts["failed"] ?? 0 };
  }

  async deliveredAt(id: string): Promise<Date | undefined> {
    const score = await this.opts.redis.zscore(ACKED_AT, id);
    if (score === null) return undefined;
    const at = Number(score);
    return at >= Date.now() - DELIVERED_KEPT_MS ? new Date(at) : undefined;
  }

  async deliveredIds(prefix: string): Promise<Array<{ id: string; at: string }>> {
    // Ids are ASCII: U+FFFF sorts after every id that starts with the prefix.
    const ids = await this.opts.redis.zrangebylex(ACKED_IDS, `[${prefix}`, `[${prefix}\uffff`);
    if (ids.length === 0) return [];
    const scores = await this.opts.redis.zmscore(ACKED_AT, ...ids);
    const since = Date.now() - DELIVERED_KEPT_MS;
    return ids
      .map((id, i) => ({ id, at: Number(scores[i] ?? Number.NaN) }))
      .filter(({ at }) => at >= since)
      .sort((a, b) => a.at - b.at)
      .map(({ id, at }) => ({ id, at: iso(at) }));
  }

  async retry(which: string): Promise<number> {
    const chosen = which === "dead" ? await this.queue.getJobs(["failed"]) : [await this.pendingOrDead(which)];
    const now = Date.now();
    const targets = new Set<string>();
    for (const job of chosen) {
      const data = this.dataOf(job);
      if (!data) continue;
      const { retryAt: _retryAt, ...rest } = data;
      await job.updateData({ ...rest, giveUpAt: iso(now + GIVE_UP_AFTER_MS) });
      const state = await job.getState();
      if (state === "failed") await job.retry("failed", { resetAttemptsMade: true });
      else if (state === "delayed") await job.promote();
      targets.add(targetKey(data.target));
      this.mine.add(job.id!);
      const told = { id: job.id!, target: targetKey(data.target), to: describeTarget(data.target), kind: data.target.kind };
      this.tell({ ...told, status: "retried", attempts: 0, nextAttemptAt: iso(now) });
    }
    if (targets.size > 0) await this.opts.redis.hdel(DISABLED, ...targets);
    return chosen.length;
  }

  async release(id: string): Promise<void> {
    const job = await this.pendingOrDead(id);
    const data = this.dataOf(job);
    if (data?.held === undefined) throw new Error(`delivery ${id} is not held; only a held delivery is released`);
    const { held: _held, retryAt: _retryAt, ...rest } = data;
    await job.updateData({ ...rest, giveUpAt: iso(Date.now() + GIVE_UP_AFTER_MS) });
    await job.promote();
    this.mine.add(id);
    this.tell({
      id,
      status: "released",
      attempts: 0,
      target: targetKey(rest.target),
      to: describeTarget(rest.target),
      kind: rest.target.kind,
    });
  }

  async purge(): Promise<number> {
    const removed = await this.queue.clean(0, 0, "failed");
    return removed.length;
  }

  /** The disabled targets with when and why, for `countd outbox`. */
  async disabledSince(): Promise<Record<string, DisabledTarget>> {
    const all = await this.opts.redis.hgetall(DISABLED);
    return Object.fromEntries(Object.keys(all).map((key) => [key, parseDisabled(all[key]!)]));
  }

  async disabledTargets(): Promise<string[]> {
    return this.opts.redis.hkeys(DISABLED);
  }

  async enableTargets(why: string): Promise<string[]> {
    const keys = await this.disabledTargets();
    if (keys.length === 0) return keys;
    await this.opts.redis.hdel(DISABLED, ...keys);
    for (const key of keys) {
      this.log.info({ target: key, why }, "delivery target enabled again; its dead deliveries are sent again by `countd outbox retry`");
    }
    return keys;
  }

  /** The status a run's deliveries carry, if it queued any (its answer to `deliver`, or its failure to `on_failure`). */
  async queuedStatus(job: Pick<Job, "name" | "deliver" | "onFailure">, runId: string): Promise<RunStatus | undefined> {
    for (const target of [...job.deliver, ...job.onFailure]) {
      const queued = await this.queue.getJob(deliveryId(`${job.name}.${runId}`, target));
      const data = queued && this.dataOf(queued);
      if (data) return data.message.run.status;
    }
    return undefined;
  }

  /** One attempt, by whichever daemon took the delivery; a throw is BullMQ's failure (RetryLater) or death (UnrecoverableError). */
  private async deliver(job: QueuedJob): Promise<void> {
    const id = job.id!;
    const data = this.dataOf(job);
    if (!data) throw new UnrecoverableError("not a delivery this countd can read");
    if (data.held !== undefined) throw new UnrecoverableError(`held and never released; gave up after 24 h (${data.held})`);
    if (await this.deliveredAt(id)) {
      this.log.info({ delivery: id }, "delivery already acknowledged; not sent again");
      return;
    }
    const own = ownEntry(entryOf(job, data, "pending"), this.opts.own);
    if ("refused" in own) {
      this.log.warn({ delivery: id, job: data.message.job, error: own.refused }, "delivery in Redis refused; marked dead");
      this.tell({
        id,
        target: targetKey(data.target),
        to: describeTarget(data.target),
        kind: data.target.kind,
        status: "dead",
        attempts: 0,
        error: own.refused,
      });
      throw new UnrecoverableError(own.refused);
    }
    const entry = own.entry;
    const told = { id, target: targetKey(entry.target), to: describeTarget(entry.target), kind: entry.target.kind };
    const disabled = await this.disabled(told.target);
    if (disabled) {
      this.log.warn({ delivery: id, target: told.target, error: disabled.reason }, "delivery not sent");
      this.tell({ ...told, status: "dead", attempts: job.attemptsMade, error: disabled.reason });
      throw new UnrecoverableError(disabled.reason);
    }
    entry.attempts = job.attemptsMade + 1;
    this.tell({ ...told, status: "sending", attempts: entry.attempts });
    try {
      await this.opts.send(entry);
    } catch (err) {
      throw await this.failure(job, entry, err);
    }
    const now = Date.now();
    await this.opts.redis.eval(ACK, 2, ACKED_AT, ACKED_IDS, id, String(now), String(now - DELIVERED_KEPT_MS), String(EXPIRE_PER_ACK));
    this.tell({ ...told, status: "delivered", attempts: entry.attempts });
    this.log.info({ delivery: id, attempts: entry.attempts }, "delivered");
  }

  /** As a daemon's own outbox decides after a failed attempt: the error that makes BullMQ retry it, or give it up. */
  private async failure(job: QueuedJob, entry: OutboxEntry, err: unknown): Promise<Error> {
    const failure = err instanceof DeliveryError ? err : undefined;
    const reason = errorText(err);
    const key = targetKey(entry.target);
    const fields = { delivery: entry.id, target: key, attempts: entry.attempts, error: reason };
    const told = { id: entry.id, target: key, to: describeTarget(entry.target), kind: entry.target.kind, attempts: entry.attempts };
    if (failure?.disableTarget) {
      const disabled: DisabledTarget = { at: iso(Date.now()), reason: `target disabled after HTTP ${failure.status ?? 410}` };
      await this.opts.redis.hset(DISABLED, key, JSON.stringify(disabled));
      this.log.warn(
        fields,
        "delivery target disabled; nothing more is sent to it until its URL changes in the job file, SIGHUP, or `countd outbox retry`",
      );
      this.tell({ ...told, status: "dead", error: reason });
      return new UnrecoverableError(reason);
    }
    if (failure?.permanent) {
      this.log.warn(fields, "delivery failed for good");
      this.tell({ ...told, status: "dead", error: reason });
      return new UnrecoverableError(reason);
    }
    const delayMs = retryDelayMs(entry.attempts, Math.random, failure?.retryAfterMs);
    const retryAt = Date.now() + delayMs;
    if (retryAt > Date.parse(entry.giveUpAt)) {
      this.log.warn(fields, "delivery gave up after 24 h");
      this.tell({ ...told, status: "dead", error: `gave up after 24 h: ${reason}` });
      return new UnrecoverableError(`gave up after 24 h: ${reason}`);
    }
    // Shown by `countd outbox` on any node as the next attempt.
    await job.updateData({ ...(job.data as DeliveryData), retryAt: iso(retryAt) });
    this.log.info({ ...fields, retryAt: iso(retryAt) }, "delivery failed, retrying later");
    this.tell({ ...told, status: "failed", error: reason, nextAttemptAt: iso(retryAt) });
    return new RetryLater(reason, delayMs);
  }

  private async disabled(key: string): Promise<DisabledTarget | undefined> {
    const text = await this.opts.redis.hget(DISABLED, key);
    return text === null ? undefined : parseDisabled(text);
  }

  /** A delivery that `countd outbox retry <id>` may send again; throws, as a daemon's own outbox does, for one acknowledged or unknown. */
  private async pendingOrDead(id: string): Promise<QueuedJob> {
    const deliveredAt = await this.deliveredAt(id);
    if (deliveredAt)
      throw new Error(`delivery ${id} was acknowledged at ${deliveredAt.toISOString()}; a delivered message is not sent again`);
    const job = await this.queue.getJob(id);
    const state = job ? await job.getState() : "unknown";
    if (!job || state === "completed" || state === "unknown")
      throw new Error(`no pending or dead delivery with id "${id}" in the cluster's outbox`);
    return job;
  }

  private async entries(states: JobType[], status: OutboxEntry["status"]): Promise<OutboxEntry[]> {
    const jobs = await this.queue.getJobs(states);
    return jobs
      .flatMap((job) => {
        const data = this.dataOf(job);
        return data ? [entryOf(job, data, status)] : [];
      })
      .sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
  }

  /** Undefined while the delivery is pending. */
  private async settledAs(id: string): Promise<Settled | undefined> {
    if (await this.deliveredAt(id)) return { id, delivered: true };
    const job = await this.queue.getJob(id);
    if (!job) return { id, delivered: false, error: `no delivery with id "${id}"` };
    const state = await job.getState();
    if (state === "failed") return { id, delivered: false, error: job.failedReason || "dead" };
    // Completed without an acknowledgement kept: one older than DELIVERED_KEPT_MS.
    if (state === "completed") return { id, delivered: true };
    return undefined;
  }

  private dataOf(job: QueuedJob): DeliveryData | undefined {
    const parsed = dataShape.safeParse(job.data);
    if (parsed.success) return parsed.data;
    this.log.warn(
      { delivery: job.id, problem: parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ") },
      "delivery in Redis cannot be used; skipped",
    );
    return undefined;
  }

  private tell(event: CountdEvents["delivery"]): void {
    this.opts.events?.emit("delivery", event);
  }
}

/**
 * The cluster's outbox for a command (`countd outbox`, `countd run`) on a connection of its own,
 * which close() lets go of; Redis unreachable is RedisUnusable, as at a daemon's start.
 */
export async function openClusterOutbox(settings: ClusterConfig, send: SendFn, own: OwnDeliveries, log?: Logger): Promise<ClusterOutbox> {
  const redis = await commandRedis(settings, { role: "queues", ...(log ? { log } : {}) });
  return new ClusterOutbox({ redis, send, own, holdMs: settings.hold, ...(log ? { log } : {}), ownsConnection: true });
}
