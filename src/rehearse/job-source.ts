import path from "node:path";
import type { Config } from "../config/schema.js";
import { jobContext } from "../jobs/context.js";
import { builtInJobs } from "../jobs/heartbeat.js";
import { displayPath, loadJobsDir, readJobFile } from "../jobs/load.js";
import { notRunnable } from "../jobs/not-runnable.js";
import type { Job } from "../jobs/types.js";

/**
 * The job `countd rehearse <which>` rehearses: a job file's path (a draft not yet in jobs/), else
 * a job's name in `jobsDir` (countd.yaml's jobs folder when not given), else `@heartbeat` while
 * the heartbeat is enabled. A disabled job is returned: rehearsing it before enabling it is the
 * point. An invalid file or an unknown name throws, saying so as `countd run` does.
 */
export async function jobToRehearse(
  config: Config,
  which: string,
  opts: { jobsDir?: string; env?: NodeJS.ProcessEnv },
): Promise<{ job: Job; file?: string }> {
  const ctx = jobContext(config, opts.env ?? process.env);
  if (isJobPath(which)) {
    const { job, problems } = await readJobFile(which, ctx);
    if (!job || problems.length > 0) throw new Error(`${displayPath(path.resolve(which))} is invalid:\n${problems.join("\n")}`);
    return { job, file: job.file };
  }
  const dir = opts.jobsDir ?? config.paths.jobs;
  const { jobs, problems } = await loadJobsDir(dir, ctx);
  const job = jobs.find((candidate) => candidate.name === which);
  if (job) return { job, file: job.file };
  const builtIn = builtInJobs(config).find((candidate) => candidate.name === which);
  if (builtIn) return { job: builtIn };
  throw await notRunnable(which, dir, jobs, problems);
}

/** A path names a file: it has a separator or ends in .yaml/.yml, as a job's name (jobs/schema.ts) seldom does. */
function isJobPath(which: string): boolean {
  return /\.ya?ml$/.test(which) || which.includes("/") || which.includes(path.sep);
}
