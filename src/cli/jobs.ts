import path from "node:path";
import ms from "ms";
import type { Config } from "../config/schema.js";
import { displayPath, listJobFiles, readJobFiles, selectJobs } from "../jobs/load.js";
import { HEARTBEAT_JOB } from "../runner/heartbeat-runs.js";
import type { RunRecord } from "../store/run-record.js";
import { readArmed, type Armed, type ArmedJob } from "../store/armed.js";
import { lastExchange } from "../store/last-exchange.js";
import type { StateStore } from "../store/state.js";
import { openState } from "../cluster/state.js";
import { hhmm, nextCheckIn } from "../triggers/heartbeat.js";
import { nextFires } from "../jobs/schedule.js";
import { EXIT, table } from "./output.js";
import { setting } from "./reports.js";
import { shownTime } from "../time.js";

const HEADER = ["JOB", "TRIGGER", "TIMEZONE", "NEXT FIRES", "LAST RUN", "PROBLEM"];

/**
 * `countd jobs`: every job file's job with its trigger, timezone, next three fires and last run,
 * then the heartbeat. A file that is invalid now is listed too, marked: with the last good version
 * the running daemon still fires (it publishes what it fires in armed.json), or as not loaded.
 * A paused job is marked: its fires are recorded skipped.
 */
export async function listJobs(opts: { config?: string }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const listed = await listJobFiles(config.paths.jobs);
  const results = await readJobFiles("files" in listed ? listed.files : [], ctx);
  const selected = selectJobs(results);
  const problems = [...("problem" in listed ? [listed.problem] : []), ...selected.problems];
  const { state, close } = await openState(config);
  try {
    return await jobsTable(config, state, results, selected, problems);
  } finally {
    await close();
  }
}

async function jobsTable(
  config: Config,
  state: StateStore,
  results: Awaited<ReturnType<typeof readJobFiles>>,
  selected: ReturnType<typeof selectJobs>,
  problems: string[],
): Promise<number> {
  const armed = await readArmed(config.paths.state);
  const now = new Date();

  const rows: string[][] = [];
  for (const result of results) {
    const shown = displayPath(result.file);
    const own = problems.filter((problem) => problem.startsWith(`${shown}:`)).length;
    const valid = selected.jobs.find((job) => job.file === result.file);
    const job: ArmedJob | undefined = valid ?? armed?.jobs.find((fired) => fired.file === result.file);
    const why = result.job ? "its name is taken" : "invalid file";
    const mark = own === 0 ? "" : `${why} (${own === 1 ? "1 problem" : `${own} problems`}): ${job ? "its last good version fires" : "not loaded"}`;
    if (!job) {
      rows.push([path.basename(result.file).replace(/\.ya?ml$/, ""), "-", "-", "-", "-", mark]);
      continue;
    }
    const done = state.job(job.name).done === true;
    const next = job.enabled && job.schedule && !done ? nextFires(job.schedule, job.timezone, now, 3) : [];
    const last = (await state.runs(job.name)).at(-1);
    const seconds = hasSeconds([...next, ...(job.schedule?.kind === "at" ? [job.schedule.date] : [])]);
    rows.push([
      job.name + (job.enabled ? "" : " (disabled)") + (state.isPaused(job.name) ? " (paused)" : ""),
      trigger(job, seconds),
      job.timezone,
      next.map((date) => shownTime(date, job.timezone, seconds)).join(", ") || (done ? "done" : "-"),
      lastRun(last, job.timezone, seconds),
      mark,
    ]);
  }
  rows.push(await heartbeatRow(config, state, armed));

  process.stdout.write(table(HEADER, rows));
  problems.forEach((problem) => process.stderr.write(`${problem}\n`));
  return problems.length > 0 ? EXIT.failure : EXIT.ok;
}

/**
 * The heartbeat's next check-in: the first of the running daemon's ticks at which the heartbeat's
 * rules (active hours, daily cap, idle threshold, checklist) let it ask the agent, which may still
 * choose to stay silent.
 */
async function heartbeatRow(config: Config, state: StateStore, armed: Armed | undefined): Promise<string[]> {
  const heartbeat = config.heartbeat;
  const { start, end } = heartbeat.activeHours;
  const hours = start === end ? "all day" : `active ${hhmm(start)}-${hhmm(end)}`;
  let next = "-";
  if (heartbeat.enabled && !armed) next = "- (countd is not running)";
  if (heartbeat.enabled && armed?.heartbeat) {
    const at = await nextCheckIn({
      config: { ...heartbeat, everyMs: armed.heartbeat.everyMs },
      state: state.data.heartbeat,
      firstTick: armed.heartbeat.nextTickAt,
      ...(await lastExchangeOf(config)),
    });
    next = at ? shownTime(at, heartbeat.timezone, true) : "none within a week of ticks";
  }
  return [
    HEARTBEAT_JOB + (heartbeat.enabled ? "" : " (disabled)"),
    `heartbeat every ${ms(heartbeat.everyMs)}, ${hours}`,
    heartbeat.timezone,
    next,
    lastRun((await state.runs(HEARTBEAT_JOB)).at(-1), heartbeat.timezone, true),
    "",
  ];
}

async function lastExchangeOf(config: Config): Promise<{ lastExchange?: Date }> {
  const at = await lastExchange(config.paths.state);
  return at ? { lastExchange: at } : {};
}

function trigger(job: ArmedJob, seconds: boolean): string {
  const parts: string[] = [];
  const { schedule, watch, webhook } = job;
  if (schedule?.kind === "cron") parts.push(`cron ${schedule.expression}`);
  if (schedule?.kind === "every") parts.push(`every ${ms(schedule.intervalMs)}`);
  if (schedule?.kind === "at") parts.push(`at ${shownTime(schedule.date, job.timezone, seconds)}`);
  if (watch) parts.push(`watch ${watch.paths.length === 1 ? "1 path" : `${watch.paths.length} paths`}`);
  if (webhook) parts.push("webhook");
  return parts.join(" + ") || "manual";
}

function lastRun(run: RunRecord | undefined, timezone: string, seconds: boolean): string {
  return run ? `${run.status} ${shownTime(new Date(run.startedAt), timezone, seconds)}` : "-";
}

/** Seconds are shown when a time needs them: `*\/10 * * * * *` is otherwise three identical minutes. */
function hasSeconds(dates: readonly Date[]): boolean {
  return dates.some((date) => date.getUTCSeconds() !== 0 || date.getUTCMilliseconds() !== 0);
}
