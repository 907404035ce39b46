import { mkdir, mkdtemp, readdir, readFile, readlink, realpath, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { expect } from "vitest";
import { PathGuard, ToolRefusal } from "../../src/tools/paths.js";
import { ToolRegistry } from "../../src/tools/registry.js";
import type { Tool } from "../../src/tools/types.js";
import { EXEC_DEFAULTS, execTool, type ExecOptions } from "../../src/tools/shell.js";

export interface Sandbox {
  /** Real path of the temporary folder holding both the workspace and the sentinel. */
  root: string;
  /** Empty folder the tools are confined to. */
  workspace: string;
  /** Sentinel folder next to the workspace, pre-filled with files an attack would aim at. */
  outside: string;
  /** A fake home folder inside `outside` (with .ssh/id_rsa), for tests that point HOME at it. */
  home: string;
  /**
   * Every name, file content and symlink target under `root` except the workspace: two equal
   * snapshots mean nothing outside the workspace was created, changed or removed.
   */
  snapshot(): Promise<string>;
}

export async function makeSandbox(): Promise<Sandbox> {
  // Real path, so refusal messages and the guard's resolved paths match what tests compare.
  const root = await realpath(await mkdtemp(join(tmpdir(), "countd-sandbox-")));
  const workspace = join(root, "workspace");
  const outside = join(root, "outside");
  const home = join(outside, "home");
  await mkdir(workspace);
  await mkdir(join(home, ".ssh"), { recursive: true });
  await mkdir(join(outside, "nested"));
  await writeFile(join(outside, "secret.txt"), "TOP SECRET sentinel\n");
  await writeFile(join(outside, "nested", "deep.txt"), "deep sentinel\n");
  await writeFile(join(home, ".ssh", "id_rsa"), "-----BEGIN FAKE KEY-----\n");
  await writeFile(join(home, ".bashrc"), "# sentinel bashrc\n");
  return { root, workspace, outside, home, snapshot: () => snapshotTree(root, [workspace]) };
}

/** Names, contents and link targets of everything under `dir`, skipping the `skip` folders. */
export async function snapshotTree(dir: string, skip: string[] = []): Promise<string> {
  const lines: string[] = [];
  const walk = async (current: string): Promise<void> => {
    const entries = (await readdir(current, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      const full = join(current, entry.name);
      if (skip.includes(full)) continue;
      const name = relative(dir, full);
      if (entry.isSymbolicLink()) lines.push(`link ${name} -> ${await readlink(full)}`);
      else if (entry.isDirectory()) {
        lines.push(`dir  ${name}/`);
        await walk(full);
      } else lines.push(`file ${name} ${JSON.stringify((await readFile(full)).toString("base64"))}`);
    }
  };
  await walk(dir);
  return lines.join("\n");
}

/**
 * Runs a tool the way the agent loop does: arguments checked by the tool's schema first (a
 * schema error rejects with "invalid arguments: ..."), then execute, whose result or error is
 * what the LLM would read.
 */
export async function runTool(
  tools: Tool[],
  name: string,
  args: unknown,
  workspace = ".",
  wrote?: (path: string) => void,
): Promise<string> {
  const registry = new ToolRegistry().register(...tools);
  const tool = registry.get(name);
  if (!tool) throw new Error(`no tool "${name}" among ${registry.names.join(", ")}`);
  const checked = registry.validate(tool, args);
  if (!checked.ok) throw new Error(`invalid arguments: ${checked.error}`);
  return tool.execute(checked.args, { sessionId: "test", workspace, signal: new AbortController().signal, wrote });
}

/** The exec tool on `workspace` with only the safe defaults, as a test changes them. */
export function execOn(workspace: string, overrides: Partial<ExecOptions> & { restrict?: boolean } = {}) {
  const { restrict = true, ...rest } = overrides;
  return execTool({
    guard: new PathGuard({ workspace, restrictToWorkspace: restrict, readOnlyRoots: [] }),
    ...EXEC_DEFAULTS,
    sandbox: "none",
    network: false,
    hiddenPaths: [],
    denyPatterns: [],
    allowList: [],
    envNames: [],
    ...rest,
  });
}

/**
 * Runs `command` through the exec tool (no sandbox, 2 s limit, as `overrides` change it) and
 * asserts it was refused with `message` and that nothing outside the workspace changed: a check
 * that let the attack through would have really touched the sentinel.
 */
export async function expectRefused(sb: Sandbox, command: string, message: string | RegExp, overrides: Partial<ExecOptions> = {}) {
  const before = await sb.snapshot();
  const err = await execOn(sb.workspace, { timeoutMs: 2_000, ...overrides })
    .execute({ command }, { sessionId: "attack", workspace: sb.workspace, signal: new AbortController().signal })
    .then(
      (out) => new Error(`not refused, ran with output: ${out}`),
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(ToolRefusal);
  expect((err as Error).message).toMatch(/^refused: /);
  if (typeof message === "string") expect((err as Error).message).toContain(message);
  else expect((err as Error).message).toMatch(message);
  expect(await sb.snapshot()).toBe(before);
}
