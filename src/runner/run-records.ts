import ms from "ms";
import type { RunOutcome } from "../agent/outcome.js";
import type { Job } from "../jobs/types.js";
import { excerpt } from "../text.js";
import { recordedFiles, type RunRecord, type RunStatus } from "../store/run-record.js";
import type { FireRequest } from "./types.js";
import { uniqueRunId } from "./run-ids.js";
import { runSessionId } from "./session-ids.js";
import { emptyUsage } from "../providers/types.js";
import { REPLACED } from "./overlap.js";

/** The most a run record keeps of the answer, the … of a cut one included. */
export const EXCERPT_CHARS = 500;

/** Why the runner cancelled a run; a user's cancel carries their reason, which the record shows. */
export type CancelCause = "timeout" | "replaced" | "shutdown" | { user: string };

/**
 * A run's final record from its running one and what the executor returned: a cancel the runner
 * caused is named by its cause (`graceMs`: the shutdown's grace period, which a shutdown's names).
 */
export function endRecord(
  job: Job,
  record: RunRecord,
  outcome: RunOutcome,
  end: { at: Date; cause: CancelCause | undefined; graceMs: number },
): RunRecord {
  const { status, error } = judge(job, outcome, end.cause, end.graceMs);
  return {
    ...record,
    status,
    // A waiting run has not finished: it goes on once a person answers.
    ...(status === "waiting" ? {} : { finishedAt: end.at.toISOString() }),
    iterations: outcome.iterations,
    toolCalls: outcome.toolCalls,
    usage: outcome.usage,
    ...(outcome.cost !== undefined ? { cost: outcome.cost } : {}),
    ...(outcome.model !== undefined ? { model: outcome.model } : {}),
    ...(outcome.answer ? { resultExcerpt: excerpt(outcome.answer.trim(), EXCERPT_CHARS - 1) } : {}),
    ...(error ? { error } : {}),
  };
}

function judge(job: Job, outcome: RunOutcome, cause: CancelCause | undefined, graceMs: number): { status: RunStatus; error?: string } {
  if (outcome.status === "ok" || outcome.status === "waiting") return { status: outcome.status };
  if (typeof cause === "object") return { status: "cancelled", error: cause.user };
  switch (cause) {
    case "timeout":
      return { status: "timeout", error: `timed out after ${ms(job.timeoutMs, { long: true })}` };
    case "replaced":
      return { status: "cancelled", error: REPLACED };
    case "shutdown":
      return {
        status: "cancelled",
        error: `countd stopped and the run did not finish within the ${ms(graceMs, { long: true })} grace period`,
      };
    case undefined:
      return { status: outcome.status, error: outcome.error ?? outcome.status };
  }
}

/**
 * The record of a fire as it starts (or is recorded without running): a new id not in `taken`,
 * or, for a run that waited for a person's yes, the id and start it had.
 */
export function newRunRecord(
  fire: { job: string; session: Job["session"]; request: FireRequest; status: RunStatus; attempt: number },
  at: Date,
  taken: ReadonlySet<string>,
  node: string | undefined,
): RunRecord {
  const { job, session, request, status, attempt } = fire;
  const resumed = request.resume?.run;
  const id = resumed?.run ?? uniqueRunId(taken, at, node);
  return {
    id,
    job,
    reason: resumed ? (resumed.reason as RunRecord["reason"]) : request.reason,
    scheduledAt: resumed?.scheduledAt ?? request.scheduledAt.toISOString(),
    startedAt: resumed?.startedAt ?? at.toISOString(),
    status,
    iterations: 0,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: runSessionId(job, session, id),
    ...recordedFiles(resumed?.files ?? request.files),
    // Where daemons share a backend an attempt may run on another node than the one before it: each record says which it is.
    ...(node !== undefined ? { node, attempt } : {}),
  };
}

/** What the runner hands out, so no listener or caller can change the record it keeps. */
export function copy(record: RunRecord): RunRecord {
  return { ...record, usage: { ...record.usage } };
}
