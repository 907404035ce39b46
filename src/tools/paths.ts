import { readlink, realpath } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { isInside } from "../inside.js";
import { FinalToolError } from "./types.js";

/** A tool was asked for something its safety settings forbid; the message is what the LLM reads. */
export class ToolRefusal extends FinalToolError {
  override readonly name = "ToolRefusal";
}

export interface PathPolicy {
  workspace: string;
  /** On by default: every path must lead into the workspace (or a read-only root, for reading). */
  restrictToWorkspace: boolean;
  /** Extra folders the tools may read but never write, such as a watched inbox. */
  readOnlyRoots: string[];
  /**
   * Folders whose files become the agent's standing instructions (the workspace's skills): read,
   * never written, whatever the workspace restriction says, so the agent cannot instruct itself.
   */
  instructionDirs?: string[];
}

/**
 * The one place that decides whether a tool may touch a path. Paths are resolved to real paths
 * (every symlink followed, also one planted inside the workspace that points out) before the
 * check, so what is checked is what would be opened.
 */
export class PathGuard {
  private roots: Promise<{ workspace: string; readOnly: string[] }> | undefined;

  constructor(readonly policy: PathPolicy) {}

  /** The workspace as a real path; relative tool paths are taken from here. */
  async workspace(): Promise<string> {
    return (await this.realRoots()).workspace;
  }

  /** For reading: inside the workspace or a read-only root. */
  async forRead(path: string): Promise<string> {
    const { workspace, readOnly } = await this.realRoots();
    const real = await realPathOf(this.absolute(path, workspace));
    if (!this.policy.restrictToWorkspace || [workspace, ...readOnly].some((root) => isInside(real, root))) return real;
    throw outside(path, workspace);
  }

  /** For writing: inside the workspace; the file and its folders need not exist yet. */
  async forWrite(path: string): Promise<string> {
    const { workspace, readOnly } = await this.realRoots();
    const real = await realPathOf(this.absolute(path, workspace));
    for (const dir of this.policy.instructionDirs ?? []) {
      // Resolved on every call: the folder may appear, or be swapped for a link, at any time.
      if (isInside(real, await realPathOf(resolve(dir)))) {
        throw new ToolRefusal(
          `refused: ${shown(path)} is in ${dir}, whose files become the agent's standing instructions (skills); ` +
            "tools may read it but not write it (tools.writable_skills: true in countd.yaml allows it)",
        );
      }
    }
    if (!this.policy.restrictToWorkspace) return real;
    if (isInside(real, workspace)) return real;
    if (readOnly.some((root) => isInside(real, root))) {
      throw new ToolRefusal(`refused: ${shown(path)} is in a read-only folder; only the workspace (${workspace}) can be written`);
    }
    throw outside(path, workspace);
  }

  private absolute(path: string, workspace: string): string {
    // Node rejects such a path with a TypeError that says nothing about refusal; refuse it here instead.
    if (path.includes("\0")) throw new ToolRefusal(`refused: ${shown(path)} contains a NUL byte, which no file name can hold`);
    if (path === "~" || path.startsWith("~/")) return join(homedir(), path.slice(1));
    return resolve(workspace, path);
  }

  private realRoots() {
    this.roots ??= (async () => ({
      workspace: await realpath(this.policy.workspace),
      readOnly: await Promise.all(this.policy.readOnlyRoots.map((root) => realPathOf(resolve(root)))),
    }))().catch((err: unknown) => {
      // A workspace that is missing now may be created later: ask again next time.
      this.roots = undefined;
      throw err;
    });
    return this.roots;
  }
}

function outside(path: string, workspace: string): ToolRefusal {
  return new ToolRefusal(`refused: ${shown(path)} is outside the workspace (${workspace})`);
}

/** The path as the LLM sent it, quoted with control characters escaped and a runaway length cut. */
function shown(path: string): string {
  const quoted = JSON.stringify(path);
  return quoted.length <= 300 ? quoted : `${quoted.slice(0, 150)}…(${quoted.length} characters)…${quoted.slice(-100)}`;
}

/**
 * The real path of `path`, or of its nearest existing ancestor with the rest appended: a file
 * about to be created is judged by the real folder it would land in.
 */
async function realPathOf(path: string, depth = 0): Promise<string> {
  const tooManyLinks = () =>
    new ToolRefusal(`refused: ${shown(path)} leads through too many symbolic links (a loop, or a chain longer than 40)`);
  if (depth > 40) throw tooManyLinks();
  try {
    return await realpath(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw tooManyLinks();
    if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
    // A dangling symlink leads wherever its target would be created.
    const link = await readlink(path).catch(() => undefined);
    if (link !== undefined) return realPathOf(resolve(dirname(path), link), depth + 1);
    const parent = dirname(path);
    if (parent === path) return path;
    return join(await realPathOf(parent, depth), basename(path));
  }
}
