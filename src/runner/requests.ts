import type { RunOutcome } from "../agent/outcome.js";
import { silentLogger, type Logger } from "../log.js";
import type { RunReason, RunRecord } from "../store/run-record.js";
import type { FireDecision } from "./overlap.js";
import type { FireRequest } from "./types.js";

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
  /** After the last retry: the final record, of the run it was merged into, or the skipped record. */
  ended: Promise<RunEnd>;
}

/**
 * What a caller of Runner.request hears of each attempt of its fire, retries included: a shared
 * queue keeps it in the fire's queued job, so another daemon can tell which run a daemon killed mid-run
 * left. Each call is awaited, and its failure logged, never the run's.
 */
export interface AttemptWatch {
  /** An attempt started: its running record, saved. */
  started?(run: RunRecord, attempt: number): void | Promise<void>;
  /** An attempt ended, and what it queues (deliveries, beforeRunEnd) is queued; its final record is saved next. */
  queued?(run: RunRecord, attempt: number): void | Promise<void>;
}

/** How Runner.request takes a fire beyond the fire itself: all optional. */
export interface RunOptions {
  /** The attempt this fire is, 1 by default; retries count on from it up to job.retry.attempts. */
  attempt?: number;
  /**
   * A retry of the run with this id, which waits out `backoffMs` first (as a retry here does: the
   * job's overlap policy is not asked again, and a shutdown meanwhile records it cancelled).
   */
  retry?: { of: string; backoffMs: number };
  watch?: AttemptWatch;
  /**
   * A skip decided (decideOverlap) where the job was found busy, a queue daemons share: recorded as
   * any skip is, with its text, since this runner cannot see the run in the way.
   */
  skipped?: Extract<FireDecision, { does: "skip" }>;
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

/** A fire on its way to becoming a run, with the callers waiting for how it ends. */
export interface Pending {
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
  /** Told of each attempt (RunOptions.watch); a merged fire keeps both fires' watchers. */
  watchers: AttemptWatch[];
}

/** Several fires served by one run: the first one's reason, time and attempt, every changed file once. */
export function merge(into: Pending, more: Pending): Pending {
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

/** Why a fire was not run: countd is stopping, or no job has its name. Triggers log it (fireFromTrigger); callers answer with it. */
export class FireRefused extends Error {
  constructor(
    readonly why: "stopping" | "unknown job",
    job: string,
  ) {
    super(why === "stopping" ? `countd is stopping: job "${job}" was not run` : `no job named "${job}"`);
  }
}

/**
 * How a trigger hands a fire on (cron, watch, the files held while paused): it has no one to tell
 * of a refusal, so a fire countd is stopping for, or of a job no longer known, is logged and dropped.
 */
export function fireFromTrigger(
  runner: { request(request: FireRequest): unknown },
  log: Logger = silentLogger,
): (request: FireRequest) => void {
  const said = log.child({ component: "runner" });
  return (request) => {
    try {
      runner.request(request);
    } catch (err) {
      if (!(err instanceof FireRefused)) throw err;
      const fields = { job: request.job, reason: request.reason };
      if (err.why === "stopping") said.info(fields, "countd is stopping: fire ignored");
      else said.warn(fields, "no job by that name: fire ignored");
    }
  };
}
