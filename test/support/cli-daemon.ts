import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { vi } from "vitest";
import { BIN, runCountd, spawnDaemon, type CliRun, type DaemonProcess } from "./daemon-process.js";

/**
 * A countd folder for the commands that talk to a running daemon: countd.yaml (exec unsandboxed,
 * the console as `console` says, by default on a free port so tests at once do not compete for
 * 7420) and jobs/ with `jobs` (file name without .yaml → its text). The state directory is `<dir>/state`.
 */
export async function countdFolder(jobs: Record<string, string>, console = '{ listen: "127.0.0.1:0" }'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "countd-cli-"));
  await writeFile(join(dir, "countd.yaml"), `tools:\n  exec:\n    sandbox: none\nconsole: ${console}\n`);
  await mkdir(join(dir, "jobs"));
  for (const [name, text] of Object.entries(jobs)) await writeFile(join(dir, "jobs", `${name}.yaml`), text);
  return dir;
}

/** The environment the daemon and the commands get: the LLM at `llmUrl` (ending in /v1). */
export const llmEnv = (llmUrl: string): Record<string, string> => ({ OPENAI_BASE_URL: llmUrl, OPENAI_API_KEY: "sk-cli-daemon-test" });

/** `countd start` in `dir`, once it says it started (its console and control socket listen by then). */
export async function startDaemon(dir: string, env: Record<string, string>): Promise<DaemonProcess> {
  const daemon = spawnDaemon(dir, env);
  await vi.waitFor(
    () => {
      if (daemon.child.exitCode !== null) throw new Error(`countd start exited ${daemon.child.exitCode}:\n${daemon.output()}`);
      if (!daemon.output().includes('"countd started"')) throw new Error("not started yet");
    },
    { timeout: 20_000, interval: 50 },
  );
  return daemon;
}

/** SIGTERM, and the daemon's exit code once it stopped. */
export async function stopDaemon(daemon: DaemonProcess | undefined): Promise<number | null | undefined> {
  if (!daemon) return undefined;
  if (daemon.child.exitCode === null) daemon.child.kill("SIGTERM");
  return daemon.exited;
}

/** `countd <args>` in `dir`. */
export const countdIn = (dir: string, env: Record<string, string>) => (args: string[]) => runCountd(args, { cwd: dir, env });

export interface CountdProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code once the process ended and its output was read. */
  closed: Promise<number | null>;
}

/** `countd <args>` in `dir` left running, for commands that last (follow, a run to interrupt). */
export function spawnCountd(dir: string, env: Record<string, string>, args: string[]): CountdProcess {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, env: { PATH: process.env["PATH"] ?? "", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const closed = new Promise<number | null>((done) => child.on("close", (code) => done(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, closed };
}

export type { CliRun, DaemonProcess };
