import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../config/schema.js";
import { execOptions, pathGuard } from "./builtin.js";
import { childEnv } from "./child-env.js";
import { detectSandbox } from "./sandbox.js";
import { runGroup, sandboxedArgv } from "./shell.js";
import { ShellPolicy } from "./shell-policy.js";

/** How a check's command ended: passed, or why not (its stderr, or what stopped it). */
export type CommandVerdict = { passed: true } | { passed: false; reason: string };

/**
 * Runs a job's `verify: command:` as exec runs a command (countd.yaml's tools.exec: its policy,
 * sandbox, environment, time limit and output cap), in the workspace, with the answer on stdin
 * and the run's JSON output in the file `$COUNTD_OUTPUT` names. Exit 0 passes.
 */
export async function runCheckCommand(
  config: Config,
  command: string,
  answer: string,
  output: unknown,
  signal: AbortSignal,
): Promise<CommandVerdict> {
  const opts = execOptions(config, pathGuard(config));
  if (!config.tools.exec.enabled)
    return { passed: false, reason: "the exec tool is switched off (tools.exec.enabled: false), so no check command runs" };
  const choice = await detectSandbox(opts.sandbox);
  if (choice.kind === "unavailable") return { passed: false, reason: `refused: ${choice.reason}` };
  const dir = await realpath(await mkdtemp(join(tmpdir(), "countd-verify-")));
  try {
    const file = join(dir, "output.json");
    await writeFile(file, output === undefined ? "" : JSON.stringify(output));
    const workspace = await opts.guard.workspace();
    const env = { ...childEnv(opts.env ?? process.env, workspace, opts.envNames), COUNTD_OUTPUT: file };
    const policy = new ShellPolicy({ denyPatterns: opts.denyPatterns, allowList: opts.allowList });
    let argv: string[];
    try {
      argv = await sandboxedArgv(opts, policy, choice, { command, cwd: workspace, workspace, env, readOnly: [dir] });
    } catch (err) {
      return { passed: false, reason: (err as Error).message };
    }
    const run = await runGroup(argv, {
      cwd: workspace,
      env,
      input: answer,
      timeoutMs: opts.timeoutMs,
      maxChars: opts.maxOutputChars,
      signal,
    });
    if (run.timedOut) return { passed: false, reason: `timed out after ${opts.timeoutMs / 1000} s` };
    if (run.cancelled) return { passed: false, reason: "cancelled" };
    if (run.code === 0) return { passed: true };
    const said = run.errors.trim();
    return { passed: false, reason: said || (run.signal ? `killed by signal ${run.signal}` : `exit code ${run.code}`) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
