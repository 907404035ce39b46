import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fileTools } from "../../src/tools/filesystem.js";
import { PathGuard } from "../../src/tools/paths.js";
import { makeSandbox, runTool, type Sandbox } from "../support/sandbox.js";

/**
 * File tools raced out of the workspace: while a tool runs, another process keeps swapping the
 * folder `box` with a link to a folder outside (any concurrent writer can: another run's exec, a
 * background process, another user of a shared inbox). Whatever the timing, nothing outside may
 * be read, listed, created or changed.
 */

const ROUNDS = { reads: 1500, writes: 400, nestedWrites: 300, edits: 300, lists: 300, searches: 300 };

let box: Sandbox;
let target: string;
let before: string;
let swapper: ChildProcess | undefined;

beforeEach(async () => {
  box = await makeSandbox();
  target = join(box.outside, "target");
  await mkdir(target);
  await writeFile(join(target, "data.txt"), "OUTSIDE SECRET\n");
  await writeFile(join(target, "OUTSIDE-NAME.txt"), "");
  await mkdir(join(box.workspace, "box"));
  await writeFile(join(box.workspace, "box", "data.txt"), "inside\n");
  await symlink(target, join(box.workspace, "swap"));
  before = await box.snapshot();
  startSwapper();
});

afterEach(() => stopSwapper());

async function stopSwapper(): Promise<void> {
  const child = swapper;
  swapper = undefined;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

/**
 * Swaps box/ and the link swap -> outside/target back and forth as fast as it can, until killed.
 * A folder a tool creates as box/ while box/ is away is removed, so the swapping goes on.
 */
function startSwapper(): void {
  const script = `
    const { renameSync, rmSync } = require("node:fs");
    const [box, swap, tmp] = process.argv.slice(1);
    const attempt = (f) => { try { f(); } catch {} };
    for (;;) {
      attempt(() => renameSync(box, tmp));
      attempt(() => renameSync(swap, box));
      attempt(() => renameSync(box, swap));
      try { renameSync(tmp, box); } catch { attempt(() => rmSync(box, { recursive: true, force: true })); attempt(() => renameSync(tmp, box)); }
    }`;
  const ws = box.workspace;
  swapper = spawn(process.execPath, ["-e", script, join(ws, "box"), join(ws, "swap"), join(ws, "tmp")], { stdio: "ignore" });
}

const tools = () => fileTools({ guard: new PathGuard({ workspace: box.workspace, restrictToWorkspace: true, readOnlyRoots: [] }) });
const call = (name: string, args: unknown) =>
  runTool(tools(), name, args, box.workspace).then(
    (out) => ({ ok: true, out }),
    (err: Error) => ({ ok: false, out: err.message }),
  );

/** Files the writes planted in the outside folder, by the names the test gave them. */
async function plantedOutside(prefix: string): Promise<number> {
  const names = await readdir(target, { recursive: true });
  return names.filter((name) => name.startsWith(prefix)).length;
}

describe("attack: a folder swapped for a link while a file tool runs", () => {
  it(`read_file returns nothing from outside in ${ROUNDS.reads} reads`, { timeout: 120_000 }, async () => {
    let outside = 0;
    let inside = 0;
    for (let i = 0; i < ROUNDS.reads; i++) {
      const { ok, out } = await call("read_file", { path: "box/data.txt" });
      if (out.includes("OUTSIDE")) outside++;
      else if (ok && out === "inside") inside++;
    }
    expect({ outside }).toEqual({ outside: 0 });
    // The race did not just make every read fail.
    expect(inside).toBeGreaterThan(0);
    expect(await box.snapshot()).toBe(before);
  });

  it(`list_dir lists nothing from outside in ${ROUNDS.lists} listings`, { timeout: 120_000 }, async () => {
    let outside = 0;
    for (let i = 0; i < ROUNDS.lists; i++) {
      if ((await call("list_dir", { path: "box" })).out.includes("OUTSIDE-NAME")) outside++;
    }
    expect({ outside }).toEqual({ outside: 0 });
  });

  it(`file_search finds nothing outside in ${ROUNDS.searches} searches`, { timeout: 120_000 }, async () => {
    let outside = 0;
    for (let i = 0; i < ROUNDS.searches; i++) {
      if ((await call("file_search", { pattern: "box/*.txt" })).out.includes("OUTSIDE-NAME")) outside++;
    }
    expect({ outside }).toEqual({ outside: 0 });
  });

  it(
    `write_file plants nothing outside in ${ROUNDS.writes} new files and ${ROUNDS.nestedWrites} in new folders`,
    { timeout: 120_000 },
    async () => {
      let written = 0;
      for (let i = 0; i < ROUNDS.writes; i++) {
        if ((await call("write_file", { path: `box/planted-${i}.txt`, content: "x" })).ok) written++;
      }
      for (let i = 0; i < ROUNDS.nestedWrites; i++) {
        await call("write_file", { path: `box/planted-dir-${i}/deeper/x.txt`, content: "x" });
      }
      expect({ planted: await plantedOutside("planted") }).toEqual({ planted: 0 });
      expect(written).toBeGreaterThan(0);
      await stopSwapper();
      expect(await box.snapshot()).toBe(before);
    },
  );

  it(`write_file and edit_file change nothing outside in ${ROUNDS.edits} rounds each`, { timeout: 120_000 }, async () => {
    for (let i = 0; i < ROUNDS.edits; i++) {
      await call("write_file", { path: "box/data.txt", content: "overwritten\n" });
      await call("write_file", { path: "box/data.txt", content: "appended\n", mode: "append" });
      await call("edit_file", { path: "box/data.txt", start_line: 1, new_text: "edited" });
    }
    expect(await readFile(join(target, "data.txt"), "utf8")).toBe("OUTSIDE SECRET\n");
    expect(await box.snapshot()).toBe(before);
  });
});
