import type { Config } from "../config/schema.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";

type Zoned = { name: string; timezone: string };

/**
 * The zone a job's times are shown in: the job's own, the heartbeat's for its check-ins, and
 * countd.yaml's for a job countd no longer knows (its file removed) and for times of no job.
 * `jobs`: the jobs known, as a list or a lookup by name.
 */
export function zoneOf(
  config: Pick<Config, "timezone" | "heartbeat">,
  jobs: readonly Zoned[] | ((name: string) => Zoned | undefined),
): (job: string | undefined) => string {
  const find = typeof jobs === "function" ? jobs : (name: string) => jobs.find((job) => job.name === name);
  return (job) => {
    if (job === undefined) return config.timezone;
    if (job === HEARTBEAT_JOB) return config.heartbeat.timezone;
    return find(job)?.timezone ?? config.timezone;
  };
}
