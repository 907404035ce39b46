import { silentLogger, type Logger } from "../log.js";
import { createHash, randomBytes } from "node:crypto";
import ms from "ms";
import { CancelToken } from "../agent/cancel.js";
import type { CountdEvents, EventBus } from "../events.js";
import type { Job, OverlapPolicy } from "../jobs/types.js";
import { emptyUsage } from "../providers/types.js";
import type { StateStore } from "../store/state.js";
import { errorText, excerpt } from "../text.js";
import { LONGEST_TIMER_MS } from "../timers.js";
import { runSessionId } from "./session-ids.js";
import type { FireRequest, RunContext } from "./types.js";
import { recordedFiles, type RunReason, type RunRecord, type RunStatus } from "../store/run-record.js";
import type { RunOutcome } from "../agent/outcome.js";

export interface RunnerOptions {
  /** The job's current definition: looked up at each fire and again when the run starts. */
  job: (name: string) => Job | undefined;
  state: StateStore;
  execute: (job: Job, run: RunContext) => Promise<RunOutcome>;
  /** Runs in progress at once, over all jobs; more wait in arrival order. */
  concurrency: number;
  now?: () => Date;
  log?: Logger;
  /**
   * With the final record, before it is saved, and awaited: what it queues (deliveries) is on
   * disk before the run is recorded as ended, so a crash in between leaves the run `running`
   * (interrupted at the next start) rather than a finished run whose deliveries were never queued.
   * Not called for runs that never started (skipped, dropped).
   * `willRetry`: a failed attempt is retried, so it is not the job's last word (on_failure waits).
   * `outcome`: what the executor returned (the answer, the tool calls), which the record only excerpts.
   */
  beforeRunEnd?: (job: Job, run: RunRecord, end: { willRetry: boolean; outcome: RunOutcome }) => Promise<void>;
  /**
   * Whether the job is paused, asked as a fire arrives and again as it would start: a paused job's
   * fires are recorded skipped ("paused"), so its history shows every slot. A fire asked for by
   * hand (manual, and the retries of a manual run) runs anyway.
   */
  paused?: (job: string) => boolean;
  /** Where run.started and run.finished go, each with a copy of the record. */
  events?: EventBus;
  /** The cluster node this runner runs on, recorded with each run; undefined outside a cluster. */
  node?: string;
}

/** The most a run record keeps of the answer, the … of a cut one included. */
export const EXCERPT_CHARS = 500;

/** A failed record save is tried again after this, then after twice as long each time, up to the max. */
const SAVE_RETRY_FIRST_MS = 1_000;
const SAVE_RETRY_MAX_MS = 60_000;
/** What a run an `overlap: replace` fire cancelled says, on this node or (cluster/fires.ts) another. */
export const REPLACED = "replaced by a newer run";
const STOPPED_BEFORE_START = "countd stopped before this run started";
export const PAUSED = "paused";

/** How a fire ended: the final record and, for a run that started, what the executor returned. */
export interface RunEnd {
  record: RunRecord;
  outcome?: RunOutcome;
}

/** What became of a fire at once, with how it starts and how it ends (Runner.request). */
export interface Requested {
  /**
   * "started": a run began (`run` is its record, running); "queued": it waits for a slot, for the
   * job's run in progress, or was merged into a run already waiting; "skipped": overlap skip or a
   * paused job (`run` is the skipped record).
   */
  decision: "started" | "queued" | "skipped";
  run?: RunRecord;
  /** The running record once it starts; undefined if it never does (skipped, cancelled). */
  started: Promise<RunRecord | undefined>;
  /** Like runToEnd: after the last retry. */
  ended: Promise<RunEnd>;
}

/**
 * What a caller of runToEnd hears of each attempt of its fire, retries included: the cluster keeps
 * it in the fire's queued job, so another daemon can tell which run a daemon killed mid-run left.
 * Each call is awaited, and its failure logged, never the run's.
 */
export interface AttemptWatch {
  /** An attempt started: its running record, saved. */
  started?(run: RunRecord, attempt: number): void | Promise<void>;
  /** An attempt ended, and what it queues (deliveries, beforeRunEnd) is queued; its final record is saved next. */
  queued?(run: RunRecord, attempt: number): void | Promise<void>;
}

/** How runToEnd starts a fire: as a retry of a run another daemon left, watched. */
export interface RunOptions {
  /** The attempt this fire is, 1 by default; retries count on from it up to job.retry.attempts. */
  attempt?: number;
  /**
   * A retry of the run with this id, which waits out `backoffMs` first (as a retry here does: the
   * job's overlap policy is not asked again, and a shutdown meanwhile records it cancelled).
   */
  retry?: { of: string; backoffMs: number };
  watch?: AttemptWatch;
}

/** A fire waiting for a slot, for its job's lane, or for its retry's backoff to end. */
export interface QueuedFire {
  job: string;
  reason: RunReason;
  /** ISO 8601; for a retry, when its backoff ends. */
  scheduledAt: string;
  /** For a retry waiting out its backoff: the id of the attempt that failed, which Runner.cancel takes. */
  retryOf?: string;
}

/** A fire on its way to becoming a run, with the `run()` callers waiting for how it ends. */
interface Pending {
  request: FireRequest;
  /** 1 for the first try; retries count up to job.retry.attempts. */
  attempt: number;
  waiters: Array<(end: RunEnd) => void>;
  /** Called once, with the running record as it starts, or with the final record of a fire that never starts. */
  starts: Array<(record: RunRecord) => void>;
  /** Asked for by hand (a manual fire, one merged with it, its retries): runs while the job is paused. */
  manual: boolean;
  /** For a retry: the id of the attempt that failed. */
  retryOf?: string;
  /** Told of each attempt (runToEnd's watch); a merged fire keeps both fires' watchers. */
  watchers: AttemptWatch[];
}

/** A user's cancel carries their reason, which the record shows. */
type CancelCause = "timeout" | "replaced" | "shutdown" | { user: string };

interface InFlight {
  record: RunRecord;
  cancel: CancelToken;
  /** Why it was cancelled; the first cause wins. */
  cause?: CancelCause;
  /** The executor returned: a cancel now would not change how the run ended. */
  returned: boolean;
  /** Settles once the final record is saved. */
  ended: Promise<void>;
}

/** What the runner holds for one job besides its entries in the global queue. */
interface Lane {
  running: Set<InFlight>;
  /** Failed runs waiting out their retry backoff. */
  backoff: Map<Pending, NodeJS.Timeout>;
  /** The one run waiting for the job's current run to end (overlap queue, replace). */
  next?: Pending;
}

/**
 * Decides whether and when a fire becomes a run: the global concurrency limit (FIFO), the
 * job's overlap policy, its timeout and retries, and the run record saved at start and end.
 *
 * A job is busy while one of its runs is running, waiting for a slot, or waiting out a retry
 * backoff; the overlap policy applies to fires that arrive while it is busy. `replace` cancels
 * what is busy and starts the newer run once the cancelled one has stopped, so runs of a
 * `replace` job never overlap. `allow` on a shared-session job behaves as `queue`: two runs
 * appending to one session at once would interleave its history. A watch fire under `skip` is
 * queued instead: its files changed after the busy run looked, and no later fire would bring
 * them again (a skipped cron slot has the next slot).
 */
export class Runner {
  private readonly queue: Pending[] = [];
  private readonly lanes = new Map<string, Lane>();
  private readonly saving = new Set<Promise<void>>();
  /** The latest record handed to save, by `<job>/<id>`, until it is on disk. */
  private readonly newest = new Map<string, RunRecord>();
  /** Records whose latest save failed, waiting for retryUnsaved. */
  private readonly unsaved = new Map<string, RunRecord>();
  private saveRetry: NodeJS.Timeout | undefined;
  private saveRetryMs = SAVE_RETRY_FIRST_MS;
  private lastSaveError = "";
  private readonly now: () => Date;
  private readonly log: Logger;
  private inFlight = 0;
  private stopping = false;
  private stopped: Promise<void> | undefined;
  private graceMs = 0;

  constructor(private readonly opts: RunnerOptions) {
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "runner" });
  }

  /** Takes a fire from a trigger; after shutdown began, fires are ignored (and logged). */
  submit(request: FireRequest): void {
    if (this.stopping) {
      this.log.info({ job: request.job, reason: request.reason }, "countd is stopping: fire ignored");
      return;
    }
    const job = this.opts.job(request.job);
    if (!job) {
      this.log.warn({ job: request.job, reason: request.reason }, "no job by that name: fire ignored");
      return;
    }
    this.accept(job, pending(request, [], []));
  }

  /**
   * Like submit, resolving with the final record: after the last retry, the run it was merged
   * into, or the skipped record.
   */
  async run(request: FireRequest): Promise<RunRecord> {
    return (await this.runToEnd(request)).record;
  }

  /**
   * Like run, with the executor's outcome beside the record: the answer a caller acts on. `opts`:
   * the attempt the fire is (a rerun of a run that was interrupted elsewhere), and who hears of each attempt.
   */
  runToEnd(request: FireRequest, opts: RunOptions = {}): Promise<RunEnd> {
    try {
      return this.request(request, opts).ended;
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /**
   * Like runToEnd, also saying at once what became of the fire, for a caller that answers before
   * the run ends (the console). Throws when countd is stopping or the job is unknown.
   */
  request(request: FireRequest, opts: RunOptions = {}): Requested {
    if (this.stopping) throw new Error(`countd is stopping: job "${request.job}" was not run`);
    const job = this.opts.job(request.job);
    if (!job) throw new Error(`no job named "${request.job}"`);
    let first: RunRecord | undefined;
    let started!: (run: RunRecord | undefined) => void;
    const starting = new Promise<RunRecord | undefined>((resolve) => (started = resolve));
    const ended = new Promise<RunEnd>((resolve) => {
      const onStart = (record: RunRecord) => {
        first = record;
        started(record.status === "running" ? record : undefined);
      };
      const fire: Pending = {
        ...pending(request, [resolve], [onStart]),
        attempt: opts.attempt ?? 1,
        watchers: opts.watch ? [opts.watch] : [],
      };
      if (opts.retry) this.backOff(job, { ...fire, retryOf: opts.retry.of }, opts.retry.backoffMs);
      else this.accept(job, fire);
    });
    // Listeners run synchronously: a fire that started or was skipped has said so by now.
    if (first === undefined) return { decision: "queued", started: starting, ended };
    return { decision: first.status === "running" ? "started" : "skipped", run: first, started: starting, ended };
  }

  /**
   * Cancels a run in progress, or the retry waiting out its backoff after the attempt with this id;
   * its record says `why`. "not found" for an id that is neither (unknown, or ended).
   */
  cancel(runId: string, why: string): "cancelled" | "not found" {
    for (const [name, lane] of this.lanes) {
      for (const flight of lane.running) {
        if (flight.record.id !== runId || flight.returned) continue;
        this.cancelRun(flight, { user: why });
        return "cancelled";
      }
      for (const [retry, timer] of lane.backoff) {
        if (retry.retryOf !== runId) continue;
        clearTimeout(timer);
        lane.backoff.delete(retry);
        this.settleUnstarted(retry, "cancelled", why);
        this.releaseNext(name);
        return "cancelled";
      }
    }
    return "not found";
  }

  /**
   * Records a fire that was skipped before it reached this runner, as the cluster skips a fire of
   * an `overlap: skip` job that runs on another node; `why` is the record's error.
   */
  skip(request: FireRequest, why: string): void {
    this.settleUnstarted(pending(request, [], []), "skipped", why);
  }

  /** Copies of the records of the runs in progress, of every job. */
  running(): RunRecord[] {
    return [...this.lanes.values()].flatMap((lane) => [...lane.running].map((flight) => copy(flight.record)));
  }

  /** Fires waiting: for a slot (in arrival order), for their job's run in progress, then retries waiting out their backoff. */
  queued(): QueuedFire[] {
    const lanes = [...this.lanes.values()];
    const waiting = [
      ...this.queue,
      ...lanes.flatMap((lane) => (lane.next ? [lane.next] : [])),
      ...lanes.flatMap((lane) => [...lane.backoff.keys()]),
    ];
    return waiting.map(({ request, retryOf }) => ({
      job: request.job,
      reason: request.reason,
      scheduledAt: request.scheduledAt.toISOString(),
      ...(retryOf !== undefined ? { retryOf } : {}),
    }));
  }

  /** The sessions of runs started and not yet ended: their files are being written. */
  sessionsInUse(): Set<string> {
    const sessions = new Set<string>();
    for (const lane of this.lanes.values()) for (const flight of lane.running) sessions.add(flight.record.sessionId);
    return sessions;
  }

  /** Runs started and not yet ended, of one job or of all. */
  active(job?: string): number {
    return job === undefined ? this.inFlight : (this.lanes.get(job)?.running.size ?? 0);
  }

  /**
   * Stops taking fires, records runs that had not started as cancelled, lets running ones finish
   * within graceMs, then cancels them; resolves once every record is saved.
   */
  shutdown(graceMs: number): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.graceMs = graceMs;
      this.stopped = this.stop(graceMs);
    }
    return this.stopped!;
  }

  private async stop(graceMs: number): Promise<void> {
    const notStarted = this.queue.splice(0);
    const flights: InFlight[] = [];
    for (const lane of this.lanes.values()) {
      for (const [pending, timer] of lane.backoff) {
        clearTimeout(timer);
        notStarted.push(pending);
      }
      lane.backoff.clear();
      if (lane.next) notStarted.push(lane.next);
      lane.next = undefined;
      flights.push(...lane.running);
    }
    for (const pending of notStarted) this.settleUnstarted(pending, "cancelled", STOPPED_BEFORE_START);

    const ended = Promise.all(flights.map((flight) => flight.ended));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([ended, new Promise((resolve) => (timer = setTimeout(resolve, Math.min(graceMs, LONGEST_TIMER_MS))))]);
    clearTimeout(timer);
    for (const flight of flights) this.cancelRun(flight, "shutdown");
    await ended;
    await Promise.all(this.saving);
    clearTimeout(this.saveRetry);
    this.saveRetry = undefined;
    if (this.unsaved.size > 0) await this.retryUnsaved();
    if (this.unsaved.size > 0) {
      clearTimeout(this.saveRetry);
      const ids = [...this.unsaved.keys()];
      this.log.error({ records: ids.length, runs: ids }, "countd stopped with run records it could not save, now lost");
    }
  }

  private accept(job: Job, pending: Pending): void {
    if (this.isPaused(pending)) {
      this.settleUnstarted(pending, "skipped", PAUSED);
      return;
    }
    const lane = this.lane(job.name);
    if (!this.busy(job.name)) {
      this.enqueue(pending);
      return;
    }
    switch (overlapOf(job, pending.request)) {
      case "skip":
        this.settleUnstarted(pending, "skipped", "a run of this job was still in progress (overlap: skip)");
        return;
      case "allow":
        this.enqueue(pending);
        return;
      case "replace":
        this.replace(job.name);
        break;
      case "queue":
        break;
    }
    if (lane.next) this.log.debug({ job: job.name, reason: pending.request.reason }, "fire merged into the queued run");
    lane.next = lane.next ? merge(lane.next, pending) : pending;
    this.releaseNext(job.name);
  }

  /** Cancels everything the job has running, waiting or backing off. */
  private replace(job: string): void {
    const lane = this.lane(job);
    for (const flight of lane.running) this.cancelRun(flight, "replaced");
    for (const [pending, timer] of lane.backoff) {
      clearTimeout(timer);
      this.settleUnstarted(pending, "cancelled", REPLACED);
    }
    lane.backoff.clear();
    for (let i = this.queue.length - 1; i >= 0; i--) {
      if (this.queue[i]!.request.job !== job) continue;
      const [pending] = this.queue.splice(i, 1);
      this.settleUnstarted(pending!, "cancelled", REPLACED);
    }
  }

  private isPaused(pending: Pending): boolean {
    return !pending.manual && (this.opts.paused?.(pending.request.job) ?? false);
  }

  private busy(job: string): boolean {
    const lane = this.lane(job);
    return lane.running.size > 0 || lane.backoff.size > 0 || this.queue.some((p) => p.request.job === job);
  }

  private releaseNext(job: string): void {
    const lane = this.lane(job);
    if (!lane.next || this.busy(job)) return;
    const next = lane.next;
    lane.next = undefined;
    this.enqueue(next);
  }

  private enqueue(pending: Pending): void {
    this.queue.push(pending);
    this.pump();
  }

  private pump(): void {
    while (!this.stopping && this.inFlight < this.opts.concurrency && this.queue.length > 0) this.start(this.queue.shift()!);
  }

  private start(pending: Pending): void {
    const name = pending.request.job;
    const job = this.opts.job(name);
    // Paused while it waited: for a slot, for the job's run, or out a retry's backoff.
    const unstarted = !job ? `job "${name}" was removed before this run started` : this.isPaused(pending) ? PAUSED : undefined;
    if (!job || unstarted) {
      this.settleUnstarted(pending, "skipped", unstarted!);
      this.releaseNext(name);
      return;
    }
    const flight: InFlight = {
      record: this.newRecord(name, job.session, pending.request, "running", pending.attempt),
      cancel: new CancelToken(),
      returned: false,
      ended: Promise.resolve(),
    };
    this.lane(name).running.add(flight);
    this.inFlight++;
    flight.ended = this.drive(job, pending, flight);
    this.announce("run.started", { run: copy(flight.record) });
    for (const started of pending.starts) started(copy(flight.record));
  }

  private async drive(job: Job, pending: Pending, flight: InFlight): Promise<void> {
    const { record, cancel } = flight;
    await this.save(record);
    this.log.info({ job: job.name, runId: record.id, reason: record.reason, sessionId: record.sessionId }, "run started");
    for (const watch of pending.watchers) await this.hook(() => watch.started?.(copy(record), pending.attempt), job, record);

    const timer =
      job.timeoutMs > 0 ? setTimeout(() => this.cancelRun(flight, "timeout"), Math.min(job.timeoutMs, LONGEST_TIMER_MS)) : undefined;
    let outcome: RunOutcome;
    try {
      outcome = await this.opts.execute(job, {
        id: record.id,
        sessionId: record.sessionId,
        request: pending.request,
        clock: { at: new Date(record.startedAt), timeZone: job.timezone },
        cancel,
      });
    } catch (err) {
      outcome = { answer: "", status: "error", error: errorText(err), iterations: 0, toolCalls: 0, usage: emptyUsage() };
    } finally {
      clearTimeout(timer);
      flight.returned = true;
    }

    const { status, error } = this.judge(job, flight, outcome);
    const finishedAt = this.now();
    const end: RunRecord = {
      ...record,
      status,
      finishedAt: finishedAt.toISOString(),
      iterations: outcome.iterations,
      toolCalls: outcome.toolCalls,
      usage: outcome.usage,
      ...(outcome.cost !== undefined ? { cost: outcome.cost } : {}),
      ...(outcome.model !== undefined ? { model: outcome.model } : {}),
      ...(outcome.answer ? { resultExcerpt: excerpt(outcome.answer.trim(), EXCERPT_CHARS - 1) } : {}),
      ...(error ? { error } : {}),
    };
    const current = this.opts.job(job.name) ?? job;
    const willRetry = (status === "error" || status === "timeout") && pending.attempt < current.retry.attempts && !this.stopping;
    await this.hook(() => this.opts.beforeRunEnd?.(job, end, { willRetry, outcome }), job, end);
    for (const watch of pending.watchers) await this.hook(() => watch.queued?.(copy(end), pending.attempt), job, end);
    await this.save(end);
    this.lane(job.name).running.delete(flight);
    this.inFlight--;
    const durationMs = finishedAt.getTime() - Date.parse(record.startedAt);
    this.log[status === "error" || status === "timeout" ? "warn" : "info"](
      { job: job.name, runId: end.id, status, durationMs, ...(error ? { error } : {}) },
      "run finished",
    );
    this.announce("run.finished", { run: copy(end) });
    if (willRetry) this.retryLater(current, pending, end.id);
    else for (const resolve of pending.waiters) resolve({ record: end, outcome });
    this.releaseNext(job.name);
    this.pump();
  }

  /** The record's status and error: a cancel the runner caused is named by its cause. */
  private judge(job: Job, flight: InFlight, outcome: RunOutcome): { status: RunStatus; error?: string } {
    if (outcome.status === "ok") return { status: "ok" };
    if (typeof flight.cause === "object") return { status: "cancelled", error: flight.cause.user };
    switch (flight.cause) {
      case "timeout":
        return { status: "timeout", error: `timed out after ${ms(job.timeoutMs, { long: true })}` };
      case "replaced":
        return { status: "cancelled", error: REPLACED };
      case "shutdown":
        return {
          status: "cancelled",
          error: `countd stopped and the run did not finish within the ${ms(this.graceMs, { long: true })} grace period`,
        };
      case undefined:
        return { status: outcome.status, error: outcome.error ?? outcome.status };
    }
  }

  private retryLater(job: Job, failed: Pending, failedId: string): void {
    const scheduledAt = new Date(this.now().getTime() + job.retry.backoffMs);
    const retry: Pending = {
      request: { ...failed.request, reason: "retry", scheduledAt },
      attempt: failed.attempt + 1,
      waiters: failed.waiters,
      starts: [],
      manual: failed.manual,
      retryOf: failedId,
      watchers: failed.watchers,
    };
    // Shutdown began while the failed try's record was being saved, after it took the backoffs:
    // a timer set now would hold the retry's caller for the whole backoff.
    if (this.stopping) {
      this.settleUnstarted(retry, "cancelled", STOPPED_BEFORE_START);
      return;
    }
    this.backOff(job, retry, job.retry.backoffMs);
    this.log.info(
      { job: job.name, attempt: retry.attempt, attempts: job.retry.attempts, backoffMs: job.retry.backoffMs },
      "retry scheduled",
    );
  }

  /** A retry waits out its backoff, then joins the queue for a slot. */
  private backOff(job: Job, retry: Pending, delayMs: number): void {
    const lane = this.lane(job.name);
    const timer = setTimeout(
      () => {
        lane.backoff.delete(retry);
        this.enqueue(retry);
      },
      Math.min(delayMs, LONGEST_TIMER_MS),
    );
    lane.backoff.set(retry, timer);
  }

  private cancelRun(flight: InFlight, cause: CancelCause): void {
    if (!this.lane(flight.record.job).running.has(flight)) return;
    flight.cause ??= cause;
    flight.cancel.cancel(typeof cause === "object" ? "user" : cause);
  }

  /**
   * Records a fire that never became a run (skipped, paused, dropped at shutdown, replaced or
   * cancelled while waiting); its start listeners hear of it at once, its waiters once it is saved.
   */
  private settleUnstarted(pending: Pending, status: "skipped" | "cancelled", error: string): void {
    const name = pending.request.job;
    const session = this.opts.job(name)?.session ?? "isolated";
    const record: RunRecord = {
      ...this.newRecord(name, session, pending.request, status, pending.attempt),
      error,
    };
    record.finishedAt = record.startedAt;
    this.log.info(
      { job: name, runId: record.id, status, reason: record.reason, error },
      status === "skipped" ? "run skipped" : "run cancelled",
    );
    const saved = this.save(record);
    for (const started of pending.starts) started(copy(record));
    void saved.then(() => {
      this.announce("run.finished", { run: copy(record) });
      for (const resolve of pending.waiters) resolve({ record });
    });
  }

  private announce<K extends "run.started" | "run.finished">(name: K, payload: CountdEvents[K]): void {
    this.opts.events?.emit(name, payload);
  }

  private newRecord(job: string, session: Job["session"], request: FireRequest, status: RunStatus, attempt: number): RunRecord {
    const startedAt = this.now();
    const id = this.uniqueRunId(job, startedAt);
    return {
      id,
      job,
      reason: request.reason,
      scheduledAt: request.scheduledAt.toISOString(),
      startedAt: startedAt.toISOString(),
      status,
      iterations: 0,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: runSessionId(job, session, id),
      ...recordedFiles(request.files),
      // In a cluster an attempt may run on another node than the one before it: each record says which it is.
      ...(this.opts.node !== undefined ? { node: this.opts.node, attempt } : {}),
    };
  }

  /** Ids share a second often enough (bursts, shutdown) that the random part alone could repeat. */
  private uniqueRunId(job: string, at: Date): string {
    const taken = new Set(this.opts.state.knownRunIds(job));
    for (const flight of this.lane(job).running) taken.add(flight.record.id);
    let id: string;
    do id = runId(at, this.opts.node);
    while (taken.has(id));
    return id;
  }

  /**
   * Saves a copy (the store keeps the object it is given). A failed save is logged, never fatal
   * to the run, and never the end of the record: it is kept and saved again (retryUnsaved) until
   * the state directory takes it, unless a newer record of the same run was handed on meanwhile.
   */
  private save(record: RunRecord): Promise<void> {
    const key = `${record.job}/${record.id}`;
    this.newest.set(key, record);
    this.unsaved.delete(key);
    const saving = this.opts.state.saveRun({ ...record }).then(
      () => {
        if (this.newest.get(key) === record) this.newest.delete(key);
      },
      (err: unknown) => {
        if (this.newest.get(key) !== record) return;
        this.unsaved.set(key, record);
        this.lastSaveError = errorText(err);
        // One line per outage, not per record: with every save failing, a line each would flood the log.
        if (this.saveRetry) return;
        this.log.error(
          { job: record.job, runId: record.id, error: this.lastSaveError, retryInMs: this.saveRetryMs },
          "could not save a run record; kept, saved again later",
        );
        this.saveRetry = setTimeout(() => void this.retryUnsaved(), this.saveRetryMs).unref();
      },
    );
    this.saving.add(saving);
    void saving.finally(() => this.saving.delete(saving));
    return saving;
  }

  /** One more try for every record a save failed for; the wait doubles while the failures last. */
  private async retryUnsaved(): Promise<void> {
    const records = [...this.unsaved.values()];
    this.unsaved.clear();
    await Promise.all(records.map((record) => this.save(record)));
    clearTimeout(this.saveRetry);
    this.saveRetry = undefined;
    if (this.unsaved.size > 0) {
      this.saveRetryMs = Math.min(this.saveRetryMs * 2, SAVE_RETRY_MAX_MS);
      this.log.error({ records: this.unsaved.size, error: this.lastSaveError, retryInMs: this.saveRetryMs }, "run records still not saved");
      this.saveRetry = setTimeout(() => void this.retryUnsaved(), this.saveRetryMs).unref();
    } else {
      this.saveRetryMs = SAVE_RETRY_FIRST_MS;
      this.log.info({ records: records.length }, "saved the run records that could not be saved before");
    }
  }

  private async hook(call: () => void | Promise<void>, job: Job, record: RunRecord): Promise<void> {
    try {
      await call();
    } catch (err) {
      // A failing listener must not leave the run's slot taken.
      this.log.error({ job: job.name, runId: record.id, error: errorText(err) }, "run listener failed");
    }
  }

  private lane(job: string): Lane {
    let lane = this.lanes.get(job);
    if (!lane) this.lanes.set(job, (lane = { running: new Set(), backoff: new Map() }));
    return lane;
  }
}

/**
 * `20261130T090000Z-3f2a`: sorts by start second, readable in logs and file names. On a cluster
 * node the random part follows the node's tag, `20261130T090000Z-9c413f2a`: the runner keeps its
 * own ids apart, and the tag keeps them apart from other nodes' (random parts alone would repeat
 * once in 65,536 pairs of runs of a job started in the same second, one record replacing the other).
 */
export function runId(startedAt: Date, node?: string): string {
  const stamp = startedAt
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replace(/[-:]/g, "");
  return `${stamp}-${node === undefined ? "" : nodeTag(node)}${randomBytes(2).toString("hex")}`;
}

/** 4 hex digits from a node's name, in its run ids; Cluster.join warns when two nodes' names share one. */
export function nodeTag(node: string): string {
  return createHash("sha256").update(node).digest("hex").slice(0, 4);
}

/** The policy a fire meets: a shared-session job's `allow` and a watch fire's `skip` become `queue`. */
export function overlapOf(job: Job, request: FireRequest): OverlapPolicy {
  if (job.overlap === "allow" && job.session === "shared") return "queue";
  if (job.overlap === "skip" && request.reason === "watch") return "queue";
  return job.overlap;
}

function pending(request: FireRequest, waiters: Pending["waiters"], starts: Pending["starts"]): Pending {
  return { request, attempt: 1, waiters, starts, manual: request.reason === "manual", watchers: [] };
}

/** Several fires served by one run: the first one's reason, time and attempt, every changed file once. */
function merge(into: Pending, more: Pending): Pending {
  const files = [...new Set([...(into.request.files ?? []), ...(more.request.files ?? [])])];
  return {
    request: { ...into.request, ...(files.length > 0 ? { files } : {}) },
    attempt: into.attempt,
    waiters: [...into.waiters, ...more.waiters],
    starts: [...into.starts, ...more.starts],
    manual: into.manual || more.manual,
    watchers: [...into.watchers, ...more.watchers],
  };
}

/** What the runner hands out, so no listener or caller can change the record it keeps. */
function copy(record: RunRecord): RunRecord {
  return { ...record, usage: { ...record.usage } };
}
