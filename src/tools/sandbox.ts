import { execFile } from "node:child_process";
import { readdir, realpath, stat } from "node:fs/promises";
import { join } from "node:path";
import { isInside } from "../inside.js";

export type SandboxMode = "auto" | "bwrap" | "none";

/**
 * How commands run. `unavailable`: `auto` found no working bwrap, so exec is not offered at all
 * (fail closed); `none` was asked for explicitly and is warned about at every start.
 */
export type SandboxChoice = { kind: "bwrap" } | { kind: "none"; warning: string } | { kind: "unavailable"; reason: string };

export interface BwrapSpec {
  /** Real path of the workspace: the only folder bound read-write. */
  workspace: string;
  /** Folder the command starts in (inside the workspace). */
  cwd: string;
  network: boolean;
  /** Real paths bound read-only, so they stay readable even when they live under /tmp. */
  readOnly: string[];
  /** Existing folders inside the workspace bound read-only over its read-write bind (the skills). */
  readOnlyInWorkspace?: string[];
  /** Masked inside the sandbox: an empty tmpfs over a folder, /dev/null over a file. */
  hidden: HiddenPath[];
}

export interface HiddenPath {
  path: string;
  isDir: boolean;
}

/** The bwrap options that run a command under `spec`; the command follows after "--". */
export function bwrapArgs(spec: BwrapSpec): string[] {
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
  for (const root of spec.readOnly) args.push("--ro-bind-try", root, root);
  args.push("--bind", spec.workspace, spec.workspace);
  for (const dir of spec.readOnlyInWorkspace ?? []) args.push("--ro-bind", dir, dir);
  for (const { path, isDir } of spec.hidden) {
    // A mask over a folder holding the workspace would hide the workspace too.
    if (isInside(spec.workspace, path)) throw new Error(`exec: the hidden path ${path} contains the workspace ${spec.workspace}`);
    args.push(...(isDir ? ["--tmpfs", path] : ["--ro-bind", "/dev/null", path]));
  }
  args.push("--unshare-all");
  if (spec.network) args.push("--share-net");
  args.push("--die-with-parent", "--new-session", "--chdir", spec.cwd);
  return args;
}

/**
 * Real paths of the paths to hide and whether each is a folder; a path that does not exist has
 * nothing to hide. A folder that holds one of `keep` (the workspace, read-only roots) cannot be
 * masked whole, so its entries are hidden instead, down to the kept path: with the default layout
 * the configuration's folder holds the workspace, and its jobs folder and `.env` must still vanish.
 * The targets of the links directly in a folder to hide are hidden too, wherever they are.
 */
export async function hiddenPaths(paths: string[], keep: string[] = []): Promise<HiddenPath[]> {
  const found = new Map<string, HiddenPath>();
  const expanded = new Set<string>();
  const hide = async (path: string, top: boolean): Promise<void> => {
    let real: string;
    let isDir: boolean;
    try {
      real = await realpath(path);
      isDir = (await stat(real)).isDirectory();
    } catch (err) {
      // A dangling link or a link loop leads nowhere, so nothing there to hide.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ELOOP") return;
      throw err;
    }
    if (found.has(real) || (!top && keep.includes(real))) return;
    if (!isDir || !keep.some((kept) => kept !== real && isInside(kept, real))) {
      found.set(real, { path: real, isDir });
      if (isDir) await hideLinkTargets(real);
      return;
    }
    if (expanded.has(real)) return;
    expanded.add(real);
    for (const entry of await readdir(real)) await hide(join(real, entry), false);
  };
  // A folder masked whole still leaves what its links point to: job files linked in from a
  // checkout load through the links, and their targets hold the same webhook URLs.
  const hideLinkTargets = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (entry.isSymbolicLink()) await hide(join(dir, entry.name), false);
    }
  };
  for (const path of paths) await hide(path, true);
  return [...found.values()];
}

/**
 * Decides whether commands run inside bwrap. bwrap is tried once for real, with the options a
 * command gets, because it can be installed yet unusable (user namespaces switched off).
 */
export async function detectSandbox(mode: SandboxMode): Promise<SandboxChoice> {
  if (mode === "none") return { kind: "none", warning: NO_SANDBOX_WARNING };
  // Asked at start-up for the log and by the exec tool before its first command: probe once
  // for each PATH, which decides the bwrap that runs.
  const path = process.env["PATH"] ?? "";
  let probe = probes.get(path);
  if (!probe) probes.set(path, (probe = bwrapProblem(path)));
  const problem = await probe;
  if (problem === undefined) return { kind: "bwrap" };
  if (mode === "bwrap") throw new Error(`exec.sandbox is "bwrap" but ${problem}`);
  return {
    kind: "unavailable",
    reason:
      `exec is not offered to the agent: tools.exec.sandbox is "auto" and ${problem}. ` +
      "Install bubblewrap (apt-get install bubblewrap) so commands run sandboxed, or set tools.exec.sandbox: none " +
      "to run them without a sandbox, or tools.exec.enabled: false to silence this",
  };
}

const NO_SANDBOX_WARNING =
  "exec runs without a sandbox (tools.exec.sandbox: none): the command check is a guard rail, not a boundary; " +
  "a command can read and change whatever the countd user can";

const probes = new Map<string, Promise<string | undefined>>();

function bwrapProblem(path: string): Promise<string | undefined> {
  const probe = bwrapArgs({ workspace: "/", cwd: "/", network: false, readOnly: [], hidden: [] });
  return new Promise((resolve) => {
    // Not countd's environment: it may hold keys, and the probe needs none of them.
    execFile("bwrap", [...probe, "--", "true"], { timeout: 10_000, env: { PATH: path } }, (err, _stdout, stderr) => {
      if (!err) return resolve(undefined);
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return resolve("bwrap (Debian package bubblewrap) not found");
      const reason = stderr.trim().split("\n")[0] || err.message;
      resolve(`bwrap is installed but cannot create a sandbox here (${reason}); are unprivileged user namespaces switched off?`);
    });
  });
}
