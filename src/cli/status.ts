import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { jobContext } from "../jobs/context.js";
import { loadJobsDir } from "../jobs/load.js";
import { isAlive } from "../store/lock.js";
import { detectSandbox } from "../tools/sandbox.js";
import { EXIT } from "./output.js";

/**
 * `countd status`: whether a daemon holds the state directory, how many jobs it has, and whether
 * exec runs sandboxed, and if not, why and how to fix it. Reads only, so it works beside the daemon.
 */
export async function status(opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const { jobs, problems } = await loadJobsDir(config.paths.jobs, jobContext(config, null));
  const disabled = jobs.filter((job) => !job.enabled).length;
  const notes = [...(disabled > 0 ? [`${disabled} disabled`] : []), ...(problems.length > 0 ? [`${problems.length} problem(s): see countd validate`] : [])];
  const lines = [
    ["daemon", await daemonState(config.paths.state)],
    ["jobs", `${jobs.length} in ${config.paths.jobs}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`],
    ["sandbox", await sandboxState(config)],
  ];
  process.stdout.write(lines.map(([name, value]) => `${`${name}:`.padEnd(9)}${value}\n`).join(""));
  return EXIT.ok;
}

async function daemonState(stateDir: string): Promise<string> {
  const lock = join(stateDir, "countd.lock");
  const pid = Number.parseInt(await readFile(lock, "utf8").catch(() => ""), 10);
  if (!(pid > 0)) return `not running (no lock in ${stateDir})`;
  return isAlive(pid) ? `running (pid ${pid})` : `not running (the lock ${lock} names pid ${pid}, which has exited)`;
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
