import path from "node:path";
import { listJobFiles, readJobFiles, selectJobs, type JobContext } from "../jobs/load.js";
import type { Job } from "../jobs/types.js";
import { JOB_NAME } from "../jobs/schema.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import type { RunRecord } from "../store/run-record.js";
import type { StateStore } from "../store/state.js";
import { openState } from "../backend/open.js";
import { costText, tokensText } from "../text.js";
import { EXIT, table } from "./output.js";
import { skippedFilesNote } from "./transcript-format.js";
import { zoneOf } from "../jobs/zones.js";
import { shownTime } from "../time.js";
import { setting } from "./setting.js";

/** A waiting run has no error; its row says what it waits for and where to answer. */
const WAITING_NOTE = "waits for an answer: countd approvals";

function duration(run: RunRecord): string {
  if (!run.finishedAt) return "-";
  // Seconds, with a tenth below 10 s: ms() would round 1.5 s to "2s" and 125 s to "2m".
  const took = Date.parse(run.finishedAt) - Date.parse(run.startedAt);
  return took < 10_000 ? `${(took / 1000).toFixed(1)}s` : `${Math.round(took / 1000)}s`;
}

/** `countd history [job]`: the newest runs, with status, duration, tokens and cost. */
export async function history(job: string | undefined, opts: { config?: string; limit: number; json?: boolean }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const folder = jobsFolder(config.paths.jobs, ctx);
  const { state, close } = await openState(config);
  let runs: RunRecord[];
  try {
    if (job !== undefined) await knownJob(job, folder, state);
    runs = (job ? [...(await state.runs(job))] : await state.allRuns())
      .sort((a, b) => a.startedAt.localeCompare(b.startedAt))
      .slice(-opts.limit);
  } finally {
    await close();
  }
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
    return EXIT.ok;
  }
  const zone = zoneOf(config, (await folder()).jobs);
  const rows = runs.map((run) => [
    shownTime(run.startedAt, zone(run.job)),
    run.job,
    run.reason,
    run.status,
    duration(run),
    tokensText(run.usage),
    costText(run.cost, run.usage),
    `${run.error ?? ""}${skippedFilesNote(run)}${run.notDelivered !== undefined ? `not delivered: ${run.notDelivered}` : ""}${run.status === "waiting" ? WAITING_NOTE : ""}`,
  ]);
  process.stdout.write(table(["STARTED", "JOB", "REASON", "STATUS", "DURATION", "TOKENS", "COST", "ERROR"], rows));
  return EXIT.ok;
}

/**
 * A name `countd history` can show: a job in the jobs folder (its file may be invalid now), one
 * with recorded runs (its file may be gone), or the heartbeat. Any other is most likely a typo,
 * which an empty table would hide.
 */
async function knownJob(name: string, folder: JobsFolder, state: StateStore): Promise<void> {
  const { fileNames, jobs } = await folder();
  const inFolder = new Set([...fileNames, ...jobs.map((job) => job.name), HEARTBEAT_JOB]);
  if (inFolder.has(name) || (JOB_NAME.test(name) && (await state.runs(name)).length > 0)) return;
  const known = new Set([...inFolder, ...(await state.allRuns()).map((run) => run.job)]);
  throw new Error(`no job named "${name}" (known: ${[...known].sort().join(", ")})`);
}

type JobsFolder = () => Promise<{ fileNames: string[]; jobs: Job[] }>;

/** The jobs folder's file names and jobs, read on first use and once: a job's name and the table's zones both need them. */
function jobsFolder(dir: string, ctx: JobContext): JobsFolder {
  let read: ReturnType<JobsFolder> | undefined;
  return () =>
    (read ??= (async () => {
      const listed = await listJobFiles(dir);
      const files = "files" in listed ? listed.files : [];
      return {
        fileNames: files.map((file) => path.basename(file).replace(/\.ya?ml$/, "")),
        jobs: selectJobs(await readJobFiles(files, ctx)).jobs,
      };
    })());
}
