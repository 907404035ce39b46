import type { Job } from "../jobs/types.js";
import type { JobState } from "../store/state.js";
import { previousFire } from "../jobs/schedule.js";
import type { FireRequest } from "./types.js";

/**
 * At start-up: the one run owed for the downtime, if any. However many slots were missed, only the
 * latest counts, and only if it lies within `catchUpMs` of `now` (a slot exactly at `now` counts:
 * the trigger arms strictly after it).
 *
 * A recurring job with no `lastScheduledAt` has never fired: countd has not been running under
 * it before, so nothing was missed. A one-shot `at` has no earlier fire by nature, so it is owed
 * whenever its instant passed within the window and it is not done.
 *
 * The caller records the fire (as the trigger does: lastScheduledAt, and done for a one-shot)
 * before handing the request on, so a second restart does not owe the same slot again.
 */
export function catchUp(job: Job, state: JobState | undefined, now: Date): FireRequest | undefined {
  const schedule = job.schedule;
  if (!job.enabled || !schedule || job.catchUpMs <= 0) return undefined;
  if (schedule.kind === "at" ? state?.done : state?.lastScheduledAt === undefined) return undefined;
  const slot = previousFire(schedule, job.timezone, new Date(now.getTime() + 1));
  if (!slot || now.getTime() - slot.getTime() > job.catchUpMs) return undefined;
  if (state?.lastScheduledAt !== undefined && slot.getTime() <= Date.parse(state.lastScheduledAt)) return undefined;
  return { job: job.name, reason: "catch-up", scheduledAt: slot };
}
