import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import type { StatusView } from "../console/protocol.js";
import { jobContext } from "../jobs/context.js";
import { listJobFiles, readJobFolder, selectJobs } from "../jobs/load.js";
import { fileProblems } from "../jobs/not-armed.js";
import { isAlive } from "../store/lock.js";
import { costText, plural, span, tokensText, usd } from "../text.js";
import { detectSandbox } from "../tools/sandbox.js";
import { findDaemon } from "./control.js";
import { EXIT } from "./output.js";
import { shownTime } from "../time.js";
import { zoneOf } from "../jobs/zones.js";

/**
 * `countd status`: whether a daemon holds the state directory, how many jobs there are, whether
 * exec runs sandboxed (and if not, why and how to fix it), and, from the running daemon, what it
 * is doing, and which runs wait for an answer to a tool call. Exits 0 when the daemon runs, 3 when it does not, as `systemctl status` does.
 */
export async function status(opts: { config?: string; json?: boolean }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await findDaemon(config.paths.state);
  const view = daemon ? await daemon.call<StatusView>("GET", "/api/status") : undefined;
  const lock = await lockHolder(config.paths.state);
  const running = view !== undefined || lock.pid !== undefined;
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(view ?? { up: running, ...(lock.pid ? { pid: lock.pid } : {}) }, null, 2)}\n`);
    return running ? EXIT.ok : EXIT.notRunning;
  }
  // With no daemon, read as its start would: a variable unset here is a job it would not arm.
  const listed = await listJobFiles(config.paths.jobs);
  // Unwritten (no state folder before a first start), the job file cache only costs the next command time.
  const { results } = await readJobFolder(
    "files" in listed ? listed.files : [],
    jobContext(config, view ? null : process.env),
    config.paths.state,
  );
  const selected = selectJobs(results);
  const { jobs } = selected;
  const problems = [...("problem" in listed ? [listed.problem] : []), ...selected.problems];
  const named = fileProblems(results, new Map(jobs.map((job) => [job.file, job.name])), selected.problems).map((file) => file.name);
  const disabled = jobs.filter((job) => !job.enabled).length;
  const notes = [
    ...(disabled > 0 ? [`${disabled} disabled`] : []),
    ...(problems.length > 0 ? [`${problems.length} problem(s)${named.length > 0 ? ` in ${named.join(", ")}` : ""}: see countd jobs`] : []),
  ];
  const lines = [
    ["daemon", view ? `running (pid ${view.pid})` : lock.text],
    ["jobs", `${jobs.length} in ${config.paths.jobs}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`],
    ["sandbox", await sandboxState(config)],
    ...(view
      ? daemonLines(view, config.timezone, zoneOf(config, jobs))
      : lock.pid
        ? [
            [
              "console",
              "the daemon does not answer on its control socket or console yet (starting, or console.enabled: false with a state path too long for a socket)",
            ],
          ]
        : []),
  ];
  process.stdout.write(lines.map(([name, value]) => `${name ? `${name}:` : ""}`.padEnd(9) + `${value}\n`).join(""));
  return running ? EXIT.ok : EXIT.notRunning;
}

/**
 * What only the running daemon knows; lines without a name continue the one above. A job's times
 * are in `zone(job)`, the daemon's own in countd.yaml's `timezone`.
 */
function daemonLines(view: StatusView, timezone: string, zone: (job: string) => string): string[][] {
  const { jobs, today } = view;
  const paused = jobs.paused_all ? `all paused (countd resume --all)` : `${jobs.paused} paused`;
  const running = view.running.map((run) => [
    "",
    `${run.job}  ${run.id}${run.node !== undefined ? `  on ${run.node}` : ""}  since ${shownTime(run.started_at, zone(run.job))}  iteration ${run.iteration}  tokens ${tokensText(run.usage)}  ${costText(run.cost)}`,
  ]);
  const waiting = view.waiting.map((run) => [
    "",
    `${run.job}  ${run.run}  ${run.tool}  expires ${shownTime(run.expires_at, zone(run.job))}  (approval ${run.approval})`,
  ]);
  const next = view.next_fires.map((fire, i) => [i === 0 ? "next" : "", `${fire.job}  ${shownTime(fire.at, zone(fire.job))}`]);
  return [
    ["version", `${view.version}, up ${span(view.uptime_s * 1_000)} (since ${shownTime(view.started_at, timezone)})`],
    ["loaded", `${plural(jobs.loaded, "job")}, ${jobs.invalid} invalid, ${paused}`],
    ...jobs.invalid_jobs.map((job, i) => [
      i === 0 ? "invalid" : "",
      `${job.name} ${job.loaded ? "keeps its last good version" : "not loaded"}: ${job.problems[0] ?? ""}${job.problems.length > 1 ? ` (and ${job.problems.length - 1} more: countd jobs lists them)` : ""}`,
    ]),
    [
      "running",
      `${view.running.length === 0 ? "no run" : plural(view.running.length, "run")}${view.queued > 0 ? `, ${view.queued} queued` : ""}`,
    ],
    ...running,
    [
      "waiting",
      view.waiting.length === 0 ? "no run waits for an answer" : `${plural(view.waiting.length, "run")} for an answer: countd approvals`,
    ],
    ...waiting,
    ["outbox", `${view.outbox.pending} pending, ${view.outbox.dead} dead`],
    ...(next.length > 0 ? next : [["next", "no fire scheduled"]]),
    [
      "today",
      `${plural(today.runs, "run")}, ${plural(today.failures, "failure")}, tokens ${tokensText(today.tokens)}, ${spentText(today)}`,
    ],
    ["budget", budgetText(view.budget)],
  ];
}

/** Today's spend against countd.yaml's daily caps, in the day the budgets count. */
function budgetText(budget: StatusView["budget"]): string {
  const cost = `${usd(budget.cost)}${budget.per_day !== undefined ? ` of ${usd(budget.per_day)}` : ""}`;
  const tokens = `${budget.tokens}${budget.tokens_per_day !== undefined ? ` of ${budget.tokens_per_day}` : ""} tokens`;
  return `${cost}, ${tokens} on ${budget.date} (${budget.timezone})`;
}

/** USD of the priced runs; unpriced ones are named apart, never counted as $0. */
function spentText(spend: { runs: number; cost: number; unpriced: number }): string {
  const unpriced = plural(spend.unpriced, "unpriced run");
  // Runs that are all unpriced have no USD figure at all, not $0.
  if (spend.unpriced > 0 && spend.unpriced === spend.runs) return unpriced;
  return `${usd(spend.cost)}${spend.unpriced > 0 ? ` + ${unpriced}` : ""}`;
}

/** The lock file's pid when that process is alive, and the daemon line to show otherwise. */
async function lockHolder(stateDir: string): Promise<{ pid?: number; text: string }> {
  const lock = join(stateDir, "countd.lock");
  const pid = Number.parseInt(await readFile(lock, "utf8").catch(() => ""), 10);
  if (!(pid > 0)) return { text: `not running (no lock in ${stateDir})` };
  return isAlive(pid)
    ? { pid, text: `running (pid ${pid})` }
    : { text: `not running (the lock ${lock} names pid ${pid}, which has exited)` };
}

async function sandboxState(config: Config): Promise<string> {
  const { exec } = config.tools;
  if (!exec.enabled) return "exec is switched off (tools.exec.enabled: false)";
  const choice = await detectSandbox(exec.sandbox).catch((err: unknown) => ({ kind: "error" as const, reason: (err as Error).message }));
  if (choice.kind === "bwrap") return "bwrap: every command runs sandboxed";
  if (choice.kind === "none") return `none: ${choice.warning}`;
  if (choice.kind === "unavailable") return `unavailable: ${choice.reason}`;
  return `unavailable: ${choice.reason}; countd start, run and ask refuse to open until it works`;
}
