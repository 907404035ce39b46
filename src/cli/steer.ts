import { loadConfig } from "../config/load.js";
import { jobContext } from "../jobs/context.js";
import { builtInJobs } from "../jobs/heartbeat.js";
import { loadJobsDir } from "../jobs/load.js";
import { acquireLock } from "../store/lock.js";
import { openState } from "../backend/open.js";
import { findDaemon, requireDaemon } from "./control.js";
import { EXIT } from "./output.js";

/**
 * `countd pause <job>|--all` and `countd resume <job>|--all`. With the daemon running it changes
 * through the daemon, which keeps the pause in state.json (or in a shared backend, for every node)
 * and acts on it at once; without one, the state is changed here under the state lock, so a job
 * can be paused before the daemon starts (a kill switch thrown before `countd start` must hold
 * from its first fire).
 */
export async function steerJobs(
  change: "pause" | "resume",
  job: string | undefined,
  opts: { config?: string; all?: boolean },
): Promise<number> {
  if ((job === undefined) === !opts.all) {
    process.stderr.write(`countd: ${change}: name a job, or --all for every job\n`);
    return EXIT.usage;
  }
  const config = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await findDaemon(config.paths.state);
  let stillPaused = false;
  let keptOffline = "";
  if (daemon) {
    const path = job === undefined ? `/api/${change}` : `/api/jobs/${encodeURIComponent(job)}/${change}`;
    stillPaused = (await daemon.call<{ paused?: boolean }>("POST", path)).paused === true && change === "resume";
  } else {
    const release = await acquireLock(config.paths.state);
    try {
      if (job !== undefined) {
        const jobs = [...(await loadJobsDir(config.paths.jobs, jobContext(config, null))).jobs, ...builtInJobs(config)];
        if (!jobs.some((j) => j.name === job))
          throw new Error(`no job named "${job}" in ${config.paths.jobs} (jobs: ${jobs.map((j) => j.name).join(", ") || "none"})`);
      }
      const { state, backend, close } = await openState(config);
      keptOffline = backend.keptOffline;
      try {
        await state[change](job ?? null);
        stillPaused = change === "resume" && job !== undefined && state.isPaused(job);
      } finally {
        await close();
      }
    } finally {
      await release();
    }
  }
  const what = job === undefined ? "every job" : job;
  const done =
    change === "pause" ? `paused ${what}: fires are recorded skipped ("paused") until countd resume ${job ?? "--all"}` : `resumed ${what}`;
  process.stdout.write(
    `${stillPaused ? `${job} stays paused: every job is paused (countd resume --all)` : done}${daemon ? "" : ` (${keptOffline})`}\n`,
  );
  return EXIT.ok;
}

/** `countd cancel <run-id>`: asks the daemon to cancel a run in progress, or a retry waiting out its backoff. */
export async function cancelRun(runId: string, opts: { config?: string; job?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await requireDaemon(config.paths.state, "countd cancel");
  const query = opts.job !== undefined ? `?job=${encodeURIComponent(opts.job)}` : "";
  const answer = await daemon.call<{ run_id: string; job: string }>("POST", `/api/runs/${encodeURIComponent(runId)}/cancel${query}`);
  process.stdout.write(`cancelling run ${answer.run_id} of ${answer.job}: countd show ${answer.run_id} tells how it ended\n`);
  return EXIT.ok;
}
