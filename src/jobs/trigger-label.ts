import ms from "ms";
import { shownTime } from "../time.js";
import type { Job } from "./types.js";
import { watchLabel } from "./watch-label.js";

/** What a trigger label reads of a job: a loaded job or one the daemon published as armed. */
export type TriggerOf = Pick<Job, "timezone" | "schedule" | "after"> & { watch?: { paths: readonly string[] }; webhook?: object };

/** A job's triggers as `countd jobs` and `countd rehearse` show them: `cron 0 9 * * 1-5 + webhook`, `after collect (ok)`; `manual` when none. */
export function triggerLabel(job: TriggerOf, seconds: boolean, workspace: string): string {
  const parts: string[] = [];
  const { schedule, watch, webhook, after } = job;
  if (schedule?.kind === "cron") parts.push(`cron ${schedule.expression}`);
  if (schedule?.kind === "every") parts.push(`every ${ms(schedule.intervalMs)}`);
  if (schedule?.kind === "at") parts.push(`at ${shownTime(schedule.date, job.timezone, seconds)}`);
  if (watch) parts.push(watchLabel(watch.paths, workspace));
  if (webhook) parts.push("webhook");
  if (after) parts.push(afterLabel(after));
  return parts.join(" + ") || "manual";
}

/** Seconds are shown when a time needs them: `*\/10 * * * * *` is otherwise three identical minutes. */
export function hasSeconds(dates: readonly Date[]): boolean {
  return dates.some((date) => date.getUTCSeconds() !== 0 || date.getUTCMilliseconds() !== 0);
}

/** `after collect (ok)`, `after collect (error, timeout)`. */
export function afterLabel(after: NonNullable<Job["after"]>): string {
  return `after ${after.job} (${after.statuses.join(", ")})`;
}
