import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import * as z from "zod";
import { isInside } from "../inside.js";
import { checkEnvNames, childEnv } from "./child-env.js";
import { ToolRefusal, type PathGuard } from "./paths.js";
import { defineTool } from "./registry.js";
import { FinalToolError, type Tool } from "./types.js";
import { bwrapArgs, detectSandbox, hiddenPaths, type SandboxChoice, type SandboxMode } from "./sandbox.js";
import { ShellPolicy } from "./shell-policy.js";

export interface ExecOptions {
  guard: PathGuard;
  /** Longest a command may run; a `timeout` argument can only shorten it. */
  timeoutMs: number;
  maxOutputChars: number;
  sandbox: SandboxMode;
  /** Inside the sandbox: whether the command may use the network. */
  network: boolean;
  /**
   * Not visible inside the sandbox: the state, logs and jobs folders (webhook URLs are secrets),
   * the config file and its folder (a `.env` beside it). A folder holding the workspace has its
   * other entries hidden instead.
   */
  hiddenPaths: string[];
  /** Extra regular expressions refused on top of the built-in deny-list. */
  denyPatterns: string[];
  /** Non-empty: allow-list mode. */
  allowList: string[];
  /** Environment variables passed through besides PATH, LANG, LC_ALL and TZ. */
  envNames: string[];
  /** Where passed-through variables are read from; process.env when not given. */
  env?: NodeJS.ProcessEnv;
}

export const EXEC_DEFAULTS = { timeoutMs: 60_000, maxOutputChars: 10_000 } as const;

/** After SIGTERM, how long the command's processes get before SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** bash when there is one, so the line runs in the dialect the policy parsed. */
const SHELL = ["/bin/bash", "/usr/bin/bash"].find((path) => existsSync(path)) ?? "/bin/sh";

const parameters = z.object({
  command: z.string().min(1).describe("Shell command line to run"),
  working_dir: z.string().optional().describe("Folder to run in, relative to the workspace (default: the workspace)"),
  timeout: z.number().positive().optional().describe("Seconds before the command is stopped (at most the configured limit)"),
});

export function execTool(opts: ExecOptions): Tool<typeof parameters> {
  checkEnvNames(opts.envNames);
  const policy = new ShellPolicy({ denyPatterns: opts.denyPatterns, allowList: opts.allowList });
  const maxSeconds = opts.timeoutMs / 1000;
  let sandbox: Promise<SandboxChoice> | undefined;

  return defineTool({
    name: "exec",
    untrusted: true,
    description:
      `Run a shell command (${SHELL}) in the workspace and return its output (stdout and stderr together, ` +
      `at most ${opts.maxOutputChars} characters) and exit code. Stopped after ${maxSeconds} s. ` +
      "Commands are checked before they run; dangerous or uncheckable ones are refused." +
      (opts.allowList.length > 0 ? ` Allowed programs: ${opts.allowList.join(", ")}.` : ""),
    parameters,
    async execute(args, ctx) {
      const workspace = await opts.guard.workspace();
      const cwd = await workingDir(opts.guard, workspace, args.working_dir);
      const env = childEnv(opts.env ?? process.env, workspace, opts.envNames);
      const choice = await (sandbox ??= detectSandbox(opts.sandbox));
      // The runtime does not offer exec then; this holds for any other way the tool is reached.
      if (choice.kind === "unavailable") throw new ToolRefusal(`refused: ${choice.reason}`);
      const argv = await sandboxedArgv(opts, policy, choice, { command: args.command, cwd, workspace, env });
      const seconds = Math.min(args.timeout ?? maxSeconds, maxSeconds);
      const run = await runGroup(argv, { cwd, env, timeoutMs: seconds * 1000, maxChars: opts.maxOutputChars, signal: ctx.signal });
      if (run.cancelled) throw new Error("cancelled: the command and everything it started were stopped");
      const status = run.timedOut
        ? `[timed out after ${seconds} s: the command and everything it started were stopped]`
        : run.signal
          ? `[killed by signal ${run.signal}]`
          : `[exit code ${run.code}]`;
      return `${run.output.replace(/\n$/, "") || "(no output)"}\n${status}`;
    },
  });
}

/** The command line checked by the policy, and wrapped in bwrap when that is the sandbox; `readOnly`: more folders it may read there. */
export async function sandboxedArgv(
  opts: ExecOptions,
  policy: ShellPolicy,
  choice: SandboxChoice,
  run: { command: string; cwd: string; workspace: string; env: Record<string, string>; readOnly?: string[] },
): Promise<string[]> {
  const { kind } = choice;
  const { guard } = opts;
  const { command, cwd, workspace, env } = run;
  await policy.check(command, {
    cwd,
    workspace,
    pathDirs: env.PATH!.split(":").filter((dir) => isAbsolute(dir)),
    // In bwrap everything outside the workspace is read-only, so read-only roots may be named.
    checkPath: guard.policy.restrictToWorkspace ? (path) => (kind === "bwrap" ? guard.forRead(path) : guard.forWrite(path)) : undefined,
  });
  const argv = [SHELL, "-c", command];
  if (kind !== "bwrap") return argv;
  const readOnly = [...(guard.policy.restrictToWorkspace ? await realRoots(guard.policy.readOnlyRoots) : []), ...(run.readOnly ?? [])];
  const hidden = await hiddenPaths(opts.hiddenPaths, [workspace, ...readOnly]);
  const readOnlyInWorkspace = await instructionDirs(guard, workspace);
  return ["bwrap", ...bwrapArgs({ workspace, cwd, network: opts.network, readOnly, readOnlyInWorkspace, hidden }), "--", ...argv];
}

/**
 * The guard's instruction folders (the skills) that lie in the workspace, created when missing:
 * a read-only mount needs the folder to exist, or a command could create it writable.
 */
async function instructionDirs(guard: PathGuard, workspace: string): Promise<string[]> {
  const dirs: string[] = [];
  for (const dir of guard.policy.instructionDirs ?? []) {
    await mkdir(dir, { recursive: true });
    const real = await realpath(dir);
    if (isInside(real, workspace)) dirs.push(real);
  }
  return dirs;
}

async function realRoots(roots: string[]): Promise<string[]> {
  const real = await Promise.all(roots.map((root) => realpath(resolve(root)).catch(() => undefined)));
  return real.filter((root) => root !== undefined);
}

async function workingDir(guard: PathGuard, workspace: string, dir: string | undefined): Promise<string> {
  if (dir === undefined) return workspace;
  const real = await guard.forWrite(dir);
  // Even with the workspace restriction off, a command starts in the workspace.
  if (!isInside(real, workspace)) throw new ToolRefusal(`refused: working_dir "${dir}" is outside the workspace (${workspace})`);
  const info = await stat(real).catch(() => undefined);
  if (!info?.isDirectory()) throw new FinalToolError(`working_dir "${dir}" is not an existing folder in the workspace`);
  return real;
}

export interface RunOptions {
  cwd: string;
  /** Written to the command's stdin, which is otherwise closed. */
  input?: string;
  env: Record<string, string>;
  timeoutMs: number;
  maxChars: number;
  signal: AbortSignal;
}

export interface RunResult {
  output: string;
  /** stderr alone, capped as the output is. */
  errors: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  cancelled: boolean;
}

/**
 * Runs `argv` as the leader of its own process group and, however it ends (exit, timeout,
 * cancel), stops the whole group: nothing a command started in the background outlives it.
 */
export async function runGroup(argv: string[], opts: RunOptions): Promise<RunResult> {
  const output = new CappedOutput(opts.maxChars);
  const errors = new CappedOutput(opts.maxChars);
  const child = spawn(argv[0]!, argv.slice(1), { cwd: opts.cwd, env: opts.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  // A command that does not read its input must not fail the write; without input, stdin is closed at once.
  child.stdin.on("error", () => {});
  child.stdin.end(opts.input);
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => output.add(chunk));
  }
  child.stderr.on("data", (chunk: string) => errors.add(chunk));
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });

  let timedOut = false;
  let cancelled = false;
  const stop = new AbortController();
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort();
  }, opts.timeoutMs);
  const onCancel = () => {
    cancelled = true;
    stop.abort();
  };
  if (opts.signal.aborted) onCancel();
  else opts.signal.addEventListener("abort", onCancel, { once: true });

  try {
    const ended = await Promise.race([
      exited,
      new Promise<undefined>((resolve) => stop.signal.addEventListener("abort", () => resolve(undefined))),
    ]);
    await stopGroup(child.pid!);
    const { code, signal } = ended ?? (await exited);
    // A process that left the group (setsid) may still hold the pipes open; do not wait for it.
    const drain = setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
    }, KILL_GRACE_MS);
    await closed;
    clearTimeout(drain);
    return { output: output.text(), errors: errors.text(), code, signal, timedOut, cancelled };
  } finally {
    clearTimeout(timer);
    opts.signal.removeEventListener("abort", onCancel);
  }
}

/** SIGTERM to the group, SIGKILL to whatever is left after the grace period; resolves when the group is gone. */
async function stopGroup(pgid: number): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const deadline = Date.now() + KILL_GRACE_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    if (!(await groupRunning(pgid))) return;
  }
  signalGroup(pgid, "SIGKILL");
}

/**
 * Whether a process of the group still runs. Zombies do not count: an orphan waits for init to
 * reap it, and some container inits take their time.
 */
async function groupRunning(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  const pids = await readdir("/proc").catch(() => undefined);
  if (!pids) return true;
  for (const pid of pids) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    // Fields after the "(command name)": state, parent pid, process group.
    const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(group) === pgid && state !== "Z") return true;
  }
  return false;
}

/** False when no process of the group is left. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
}

/** Keeps the head and the tail of the output, so memory stays bounded whatever a command prints. */
class CappedOutput {
  private head = "";
  private tail = "";
  private total = 0;

  constructor(private readonly max: number) {}

  add(chunk: string): void {
    this.total += chunk.length;
    const headRoom = Math.ceil(this.max / 2) - this.head.length;
    if (headRoom > 0) {
      this.head += chunk.slice(0, headRoom);
      chunk = chunk.slice(headRoom);
    }
    this.tail = (this.tail + chunk).slice(-Math.floor(this.max / 2));
  }

  text(): string {
    const cut = this.total - this.head.length - this.tail.length;
    if (cut <= 0) return this.head + this.tail;
    return `${this.head}\n[... ${cut} characters cut from the middle of the output ...]\n${this.tail}`;
  }
}
