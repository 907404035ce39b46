import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { StateStore } from "../../src/store/state.js";
import type { RunRecord } from "../../src/store/run-record.js";

/** The built CLI: tests that spawn it run dist/ (`npm test` builds first). */
export const BIN = resolve(import.meta.dirname, "../../bin/countd.js");

export interface DaemonProcess {
  child: ChildProcess;
  /** stdout and stderr so far. */
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Every daemon a test starts takes a free port for its console: tests run side by side, and the
 * default 7420 may be a real daemon's. A test of the default passes COUNTD_CONSOLE_LISTEN: "".
 */
export const ANY_CONSOLE_PORT = { COUNTD_CONSOLE_LISTEN: "127.0.0.1:0" };

/** `countd start` as a child process in `cwd`, with only the environment given. */
export function spawnDaemon(cwd: string, env: Record<string, string>): DaemonProcess {
  const child = spawn(process.execPath, [BIN, "start"], { cwd, env: { PATH: process.env["PATH"] ?? "", ...ANY_CONSOLE_PORT, ...env } });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  return { child, output: () => output, exited };
}

/** The daemon's JSON log lines (with this message, if given); a line still being written is left out. */
export function logLines(output: string, msg?: string): Record<string, unknown>[] {
  return output.split("\n").flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      return msg === undefined || parsed["msg"] === msg ? [parsed] : [];
    } catch {
      return [];
    }
  });
}

/** A run's key, `job/id`: run ids are unique within a job only, and two jobs' runs of one second may share one. */
export const runKey = (job: string, id: string): string => `${job}/${id}`;

/** Every run record under a state directory, read the way countd reads them. */
export async function allRuns(stateDir: string): Promise<RunRecord[]> {
  return (await StateStore.open(stateDir)).allRuns();
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * One `countd` command run as a user would, in `cwd` with only the environment given;
 * `onStdout` sees the output as it grows and may interrupt the command (Ctrl-C).
 */
export function runCountd(
  args: string[],
  opts: { cwd: string; env?: Record<string, string>; onStdout?: (text: string, interrupt: () => void) => void },
): Promise<CliRun> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: opts.cwd,
      env: { PATH: process.env["PATH"] ?? "", ...ANY_CONSOLE_PORT, ...opts.env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      opts.onStdout?.(stdout, () => child.kill("SIGINT"));
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/**
 * A Node binary the user `uid` may run: the tests' own may lie where only root can enter (npx's
 * cache under /root, where CI's second pass takes Node 24 from), so the PATH's are tried after it.
 */
export function nodeForUser(uid: number): string | undefined {
  const candidates = [process.execPath, ...(process.env["PATH"] ?? "").split(":").map((dir) => join(dir, "node"))];
  return candidates.find((node) => spawnSync(node, ["-e", "0"], { uid, gid: uid }).status === 0);
}
