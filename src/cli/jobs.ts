import path from "node:path";
import ms from "ms";
import type { Config } from "../config/schema.js";
import { listJobFiles, readJobFolder, selectJobs, type JobFileResult } from "../jobs/load.js";
import { hasSeconds, triggerLabel } from "../jobs/trigger-label.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import type { RunRecord } from "../store/run-record.js";
import { readArmed, type Armed, type ArmedJob } from "../store/armed.js";
import { fileProblems } from "../jobs/not-armed.js";
import { lastExchange } from "../store/last-exchange.js";
import { checkInsOf, type StateStore } from "../store/state.js";
import { openState } from "../backend/open.js";
import { nextFires } from "../jobs/schedule.js";
import { EXIT, table } from "./output.js";
import { setting } from "./setting.js";
import { hhmm, shownTime } from "../time.js";

const HEADER = ["JOB", "TRIGGER", "TIMEZONE", "NEXT FIRES", "LAST RUN", "PROBLEM"];

/**
 * `countd jobs`: every job file's job with its trigger, timezone, next three fires and last run,
 * then the heartbeat. Beside a running daemon, what it fires is what it published in armed.json:
 * a file whose job it did not arm (invalid, or naming a variable its environment lacks) is marked
 * `not loaded` with the daemon's reason; one that turned invalid since is marked with the last
 * good version the daemon still fires. With no daemon, the files are loaded as `countd start`
 * would load them, in this environment. Exits 1 when any job is not loaded or has problems.
 * A paused job is marked: its fires are recorded skipped; a disabled one is marked, with the fires
 * it would have once enabled. `jobs`: another folder (drafts), listed as files not yet armed.
 */
export async function listJobs(opts: { config?: string; jobs?: string }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const dir = path.resolve(opts.jobs ?? config.paths.jobs);
  // Another folder (drafts) is nothing the daemon fires: its files are read as a start would read them, without the heartbeat.
  const draft = dir !== path.resolve(config.paths.jobs);
  const armed = draft ? undefined : await readArmed(config.paths.state);
  const listed = await listJobFiles(dir);
  // Opened first, so that the job file cache finds the state folder a first command makes.
  const { state, close } = await openState(config);
  try {
    // Variables are the daemon's to look up; with none running, they are looked up as its start would.
    // Drafts are kept out of the cache, which holds the files of the jobs folder; unwritten, it only costs the next command time.
    const { results } = await readJobFolder(
      "files" in listed ? listed.files : [],
      armed ? ctx : { ...ctx, env: process.env },
      draft ? undefined : config.paths.state,
    );
    const selected = selectJobs(results);
    const problems = [...("problem" in listed ? [listed.problem] : []), ...selected.problems];
    return await jobsTable(config, state, results, selected, problems, armed, !draft);
  } finally {
    await close();
  }
}

async function jobsTable(
  config: Config,
  state: StateStore,
  results: JobFileResult[],
  selected: ReturnType<typeof selectJobs>,
  problems: string[],
  armed: Armed | undefined,
  heartbeat: boolean,
): Promise<number> {
  const now = new Date();
  const own = fileProblems(results, new Map(selected.jobs.map((job) => [job.file, job.name])), selected.problems);
  // What the daemon said of a file counts over this command's reading: its environment decides an unset variable.
  const byFile = new Map([...own, ...(armed?.problems ?? [])].map((file) => [file.file, file]));
  // Its lines are shown too: this command's own reading cannot see the daemon's unset variables.
  const daemonProblems = (armed?.problems ?? []).flatMap((file) => file.problems).filter((problem) => !problems.includes(problem));

  const rows: string[][] = [];
  for (const result of results) {
    const count = byFile.get(result.file)?.problems.length ?? 0;
    const valid = selected.jobs.find((job) => job.file === result.file);
    const fired = armed?.jobs.find((job) => job.file === result.file);
    const job: ArmedJob | undefined = armed ? fired && (valid ?? fired) : valid;
    const nameTaken = result.job !== undefined && result.problems.length === 0 && own.some((file) => file.file === result.file);
    const mark =
      count === 0
        ? ""
        : `${nameTaken ? "its name is taken" : "invalid file"} (${count === 1 ? "1 problem" : `${count} problems`}): its last good version fires`;
    if (!job) {
      const reason = byFile.get(result.file)?.reason ?? `not armed by the running daemon (pid ${armed?.pid})`;
      rows.push([path.basename(result.file).replace(/\.ya?ml$/, ""), "-", "-", "-", "-", `not loaded: ${reason}`]);
      continue;
    }
    const done = state.job(job.name).done === true;
    // A disabled job's fires too: they are when it would fire once enabled, and it is marked disabled.
    const next = job.schedule && !done ? nextFires(job.schedule, job.timezone, now, 3) : [];
    const last = (await state.runs(job.name)).at(-1);
    const seconds = hasSeconds([...next, ...(job.schedule?.kind === "at" ? [job.schedule.date] : [])]);
    rows.push([
      job.name + (job.enabled ? "" : " (disabled)") + (state.isPaused(job.name) ? " (paused)" : ""),
      triggerLabel(job, seconds, config.paths.workspace),
      job.timezone,
      next.map((date) => shownTime(date, job.timezone, seconds)).join(", ") || (done ? "done" : "-"),
      lastRun(last, job.timezone, seconds),
      mark,
    ]);
  }
  if (heartbeat) rows.push(await heartbeatRow(config, state, armed));

  process.stdout.write(table(HEADER, rows));
  [...problems, ...daemonProblems].forEach((problem) => process.stderr.write(`${problem}\n`));
  return problems.length + daemonProblems.length > 0 || rows.some((row) => row[5]?.startsWith("not loaded")) ? EXIT.failure : EXIT.ok;
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
  // Its ticks as the daemon armed them: a countd.yaml changed since is in force only once reloaded.
  const ticks = armed?.jobs.find((job) => job.name === HEARTBEAT_JOB)?.schedule;
  if (heartbeat.enabled && ticks?.kind === "every") {
    // Loaded here: its checklist reading brings a Markdown lexer that a listing without a running heartbeat never uses.
    const { nextCheckIn } = await import("../triggers/heartbeat.js");
    const at = await nextCheckIn({
      config: { ...heartbeat, everyMs: ticks.intervalMs },
      state: checkInsOf(state.data),
      firstTick: nextFires(ticks, heartbeat.timezone, new Date(), 1)[0]!,
      ...(await lastExchangeOf(config)),
    });
    next = at ? shownTime(at, heartbeat.timezone, true) : "none within a week of ticks";
  }
  return [
    HEARTBEAT_JOB + (heartbeat.enabled ? "" : " (disabled)") + (state.isPaused(HEARTBEAT_JOB) ? " (paused)" : ""),
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

function lastRun(run: RunRecord | undefined, timezone: string, seconds: boolean): string {
  return run ? `${run.status} ${shownTime(new Date(run.startedAt), timezone, seconds)}` : "-";
}
