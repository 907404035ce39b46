import { silentLogger, type Logger } from "../log.js";
import { CancelToken } from "../agent/cancel.js";
import type { CountdEvents, EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import { emptyUsage } from "../providers/types.js";
import type { RunSaver } from "../store/run-saver.js";
import { errorText } from "../text.js";
import { LONGEST_TIMER_MS } from "../timers.js";
import { decideOverlap, REPLACED, type Busy } from "./overlap.js";
import { copy, endRecord, newRunRecord, type CancelCause } from "./run-records.js";
import { FireRefused, merge, type Pending, type QueuedFire, type Requested, type RunEnd, type RunOptions } from "./requests.js";
import type { FireRequest, RunContext } from "./types.js";
import type { RunNotes, RunRecord, RunStatus } from "../store/run-record.js";
import type { RunOutcome } from "../agent/outcome.js";

export interface RunnerOptions {
  /** The job's current definition: looked up at each fire and again when the run starts. */
  job: (name: string) => Job | undefined;
  /** Where run records go, saved again while the store cannot take them (store/run-saver.ts). */
  records: RunSaver;
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
   * `outcome`: what the executor returned, which the record only excerpts. Adds notes to the record.
   */
  beforeRunEnd?: (job: Job, run: RunRecord, end: { willRetry: boolean; outcome: RunOutcome }) => Promise<RunNotes | void>;
  /**
   * Whether the job is paused, asked as a fire arrives and again as it would start: a paused job's
   * fires are recorded skipped ("paused"), so its history shows every slot. A fire asked for by
   * hand (manual, and the retries of a manual run) runs anyway.
   */
  paused?: (job: string) => boolean;
  /** Where run.started and run.finished go, each with a copy of the record. */
  events?: EventBus;
  /** The node this runner runs on, recorded with each run, when daemons share a backend; undefined alone. */
  node?: string;
  /** Whether the job has a run waiting for a person's yes: its overlap counts it as running. */
  waiting?: (job: string) => boolean;
}

const STOPPED_BEFORE_START = "countd stopped before this run started";

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
 * Carries a fire to its run: the global concurrency limit (FIFO), what the overlap decision
 * (overlap.ts) says of a fire that finds its job busy, the run's timeout, retries and cancels, and
 * its record handed to the saver at start and end.
 *
 * A job is busy while one of its runs is running, waiting for a slot, or waiting out a retry
 * backoff. `replace` cancels what is busy and starts the newer run once the cancelled one has
 * stopped, so runs of a `replace` job never overlap.
 */
export class Runner {
  private readonly queue: Pending[] = [];
  private readonly lanes = new Map<string, Lane>();
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

  /**
   * The one way a fire reaches the runner: says at once what became of it (started, queued,
   * skipped), and how it starts and ends. `opts`: the attempt the fire is (a rerun of a run that
   * was interrupted elsewhere), who hears of each attempt, a skip decided across daemons. Throws
   * FireRefused when countd is stopping or the job is unknown.
   */
  request(request: FireRequest, opts: RunOptions = {}): Requested {
    if (this.stopping) throw new FireRefused("stopping", request.job);
    const job = this.opts.job(request.job);
    if (!job) throw new FireRefused("unknown job", request.job);
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
      else if (opts.skipped) this.settleUnstarted(fire, "skipped", opts.skipped.why);
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
    await this.opts.records.flush();
  }

  private accept(job: Job, pending: Pending): void {
    // The run going on is the one its overlap already let through.
    if (pending.request.resume) return this.enqueue(pending);
    const decision = decideOverlap({
      job,
      fire: { reason: pending.request.reason, manual: pending.manual },
      paused: this.opts.paused?.(job.name) ?? false,
      busy: this.busy(job.name),
    });
    switch (decision.does) {
      case "skip":
        this.settleUnstarted(pending, "skipped", decision.why);
        return;
      case "start":
      case "beside":
        this.enqueue(pending);
        return;
      case "replace":
        this.replace(job.name);
        break;
      case "queue":
        break;
    }
    const lane = this.lane(job.name);
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

  private busy(job: string): Busy {
    const lane = this.lane(job);
    if (lane.running.size > 0 || this.opts.waiting?.(job)) return "running";
    if (lane.backoff.size > 0) return "backing off";
    return this.queue.some((p) => p.request.job === job) ? "waiting" : "idle";
  }

  private releaseNext(job: string): void {
    const lane = this.lane(job);
    if (!lane.next || this.busy(job) !== "idle") return;
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
    // Paused while it waited (for a slot, for the job's run, or out a retry's backoff): asked again
    // with nothing in its way, as nothing is now.
    // A run going on after a person's yes is asked nothing: it had started.
    const now =
      job && !pending.request.resume
        ? decideOverlap({
            job,
            fire: { reason: pending.request.reason, manual: pending.manual },
            paused: this.opts.paused?.(name) ?? false,
            busy: "idle",
          })
        : undefined;
    const unstarted = !job ? `job "${name}" was removed before this run started` : now?.does === "skip" ? now.why : undefined;
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
    await this.opts.records.save(record);
    this.log.info({ job: job.name, runId: record.id, reason: record.reason, sessionId: record.sessionId }, "run started");
    for (const watch of pending.watchers) await this.hook(() => watch.started?.(copy(record), pending.attempt), job, record);

    // The time a run waited for a person is not counted: only what it was active before.
    const timeoutMs = Math.max(job.timeoutMs - (pending.request.resume?.run.loop.activeMs ?? 0), 1);
    const timer =
      job.timeoutMs > 0 ? setTimeout(() => this.cancelRun(flight, "timeout"), Math.min(timeoutMs, LONGEST_TIMER_MS)) : undefined;
    let outcome: RunOutcome;
    try {
      outcome = await this.opts.execute(job, {
        id: record.id,
        sessionId: record.sessionId,
        request: pending.request,
        clock: { at: pending.request.at ?? new Date(record.startedAt), timeZone: job.timezone },
        cancel,
      });
    } catch (err) {
      outcome = { answer: "", status: "error", error: errorText(err), iterations: 0, toolCalls: 0, usage: emptyUsage() };
    } finally {
      clearTimeout(timer);
      flight.returned = true;
    }

    const finishedAt = this.now();
    const end = endRecord(job, record, outcome, { at: finishedAt, cause: flight.cause, graceMs: this.graceMs });
    const { status, error } = end;
    const current = this.opts.job(job.name) ?? job;
    const willRetry = (status === "error" || status === "timeout") && pending.attempt < current.retry.attempts && !this.stopping;
    await this.hook(async () => void Object.assign(end, await this.opts.beforeRunEnd?.(job, end, { willRetry, outcome })), job, end);
    for (const watch of pending.watchers) await this.hook(() => watch.queued?.(copy(end), pending.attempt), job, end);
    await this.opts.records.save(end);
    this.lane(job.name).running.delete(flight);
    this.inFlight--;
    const durationMs = finishedAt.getTime() - Date.parse(record.startedAt);
    this.log[status === "error" || status === "timeout" ? "warn" : "info"](
      { job: job.name, runId: end.id, status, durationMs, ...(error ? { error } : {}) },
      status === "waiting" ? "run waiting for a person's answer; its slot is free" : "run finished",
    );
    const told = { answer: outcome.answer, ...(outcome.output !== undefined ? { output: outcome.output } : {}) };
    if (status !== "waiting") this.announce("run.finished", { run: copy(end), willRetry, outcome: told });
    if (willRetry) this.retryLater(current, pending, end.id);
    else for (const resolve of pending.waiters) resolve({ record: end, outcome });
    this.releaseNext(job.name);
    this.pump();
  }

  private retryLater(job: Job, failed: Pending, failedId: string): void {
    const scheduledAt = new Date(this.now().getTime() + job.retry.backoffMs);
    const retry: Pending = {
      // A retry starts the job afresh: a person's yes let one call of the failed attempt through, not another.
      request: { ...withoutResume(failed.request), reason: "retry", scheduledAt },
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
    const saved = this.opts.records.save(record);
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
    const taken = new Set(this.opts.records.knownRunIds(job));
    for (const flight of this.lane(job).running) taken.add(flight.record.id);
    return newRunRecord({ job, session, request, status, attempt }, this.now(), taken, this.opts.node);
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

function pending(request: FireRequest, waiters: Pending["waiters"], starts: Pending["starts"]): Pending {
  return { request, attempt: 1, waiters, starts, manual: request.reason === "manual", watchers: [] };
}

function withoutResume(request: FireRequest): FireRequest {
  const { resume: _resumed, ...rest } = request;
  return rest;
}
