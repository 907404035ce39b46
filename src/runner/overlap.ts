import type { Job } from "../jobs/types.js";
import type { RunReason } from "../store/run-record.js";

/**
 * What the job has that a new fire meets: a run in progress, a fire waiting (for a run slot or
 * behind its run), a failed run waiting out its retry backoff, or nothing.
 */
export type Busy = "idle" | "running" | "waiting" | "backing off";

export interface OverlapQuestion {
  job: Pick<Job, "overlap" | "session">;
  /** `manual`: asked for by hand (a manual fire, one merged with it, its retries). */
  fire: { reason: RunReason; manual: boolean };
  paused: boolean;
  busy: Busy;
  /**
   * The skip's text when the job was found busy by a queue several daemons share (a run on any of
   * them), in that queue's words, so a user reading the history can tell where the run in the way
   * was; this daemon's own words when absent.
   */
  busyElsewhere?: string;
}

/**
 * What becomes of a fire: `start` (nothing in the way), `skip` (recorded skipped, `why` its error),
 * `queue` (waits for the job's run, merged into the fire already waiting if there is one),
 * `replace` (what the job has busy is cancelled, then as `queue`), `beside` (runs beside it).
 */
export type FireDecision = { does: "start" } | { does: "skip"; why: string } | { does: "queue" } | { does: "replace" } | { does: "beside" };

export const PAUSED = "paused";
/** What a run an `overlap: replace` fire cancelled says, on this daemon or another sharing its schedule. */
export const REPLACED = "replaced by a newer run";
const BUSY_HERE = "a run of this job was still in progress (overlap: skip)";

/**
 * The one overlap rule, asked by the runner (as a fire arrives, and as it would start) and by a
 * queue several daemons share (which fires it deduplicates, and what it does with one it did):
 * - a paused job's fires are skipped, unless asked for by hand;
 * - a job with nothing busy starts the fire;
 * - `allow` on a shared-session job behaves as `queue`: two runs appending to one session at once
 *   would interleave its history;
 * - a watch fire under `skip` is queued instead: its files changed after the busy run looked, and
 *   no later fire would bring them again (a skipped cron slot has the next slot);
 * - otherwise the job's `overlap` says.
 */
export function decideOverlap(q: OverlapQuestion): FireDecision {
  if (q.paused && !q.fire.manual) return { does: "skip", why: PAUSED };
  if (q.busy === "idle") return { does: "start" };
  switch (policyOf(q.job, q.fire.reason)) {
    case "skip":
      return { does: "skip", why: q.busyElsewhere ?? BUSY_HERE };
    case "queue":
      return { does: "queue" };
    case "replace":
      return { does: "replace" };
    case "allow":
      return { does: "beside" };
  }
}

function policyOf(job: OverlapQuestion["job"], reason: RunReason): Job["overlap"] {
  if (job.overlap === "allow" && job.session === "shared") return "queue";
  if (job.overlap === "skip" && reason === "watch") return "queue";
  return job.overlap;
}
