import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DurableJSONFile, writeFileDurably } from "../../src/store/durable.js";
import { hasSystemPackage } from "../support/system-package.js";

const run = promisify(execFile);
const straceWorks = await hasSystemPackage("strace", import.meta.filename);
const DIST = resolve(import.meta.dirname, "../../dist");

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-durable-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * Runs `script` (an ES module body with `dir` and `dist` in scope) in a child Node under strace
 * and returns the file system calls that make a write durable, with the paths of their file
 * descriptors (-y): what reached the kernel, in order.
 */
async function traced(script: string, also: string[] = []): Promise<string[]> {
  const out = join(dir, "strace.out");
  const body = `const dir = ${JSON.stringify(dir)}; const dist = ${JSON.stringify(DIST)};\n${script}`;
  const calls = ["fsync", "fdatasync", "rename", "renameat", "renameat2", ...also];
  await run("strace", [
    "-f",
    "-y",
    "-qq",
    "-e",
    `trace=${calls.join(",")}`,
    "-o",
    out,
    process.execPath,
    "--input-type=module",
    "-e",
    body,
  ]);
  const wanted = new RegExp(`\\b(${calls.join("|")})\\(`);
  return (await readFile(out, "utf8")).split("\n").filter((line) => wanted.test(line) && !line.includes("resumed>"));
}

/** The index of the first line after `from` that matches. */
const find = (lines: string[], pattern: RegExp, from = 0) => lines.findIndex((line, i) => i >= from && pattern.test(line));
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe.skipIf(!straceWorks)("what a power cut cannot undo", () => {
  for (const [name, file, script] of [
    [
      "state.json",
      "state.json",
      `const { StateStore } = await import(dist + "/store/state.js"); const state = await StateStore.open(dir); await state.update((data) => { data.jobs.report = {}; });`,
    ],
  ] as const) {
    it(`${name}: the new file's data is synced before the rename, and the folder after it`, async () => {
      const calls = await traced(script);
      const escaped = file.replace(".", "\\.");
      const rename = find(calls, new RegExp(`rename\\w*\\(.*${escaped}\\.\\d+-\\d+\\.tmp".*${escaped}"`));
      expect(rename, calls.join("\n")).toBeGreaterThan(0);
      const dataSync = calls
        .slice(0, rename)
        .some((line) => new RegExp(`f(data)?sync\\(\\d+<[^>]*${escaped}\\.\\d+-\\d+\\.tmp>`).test(line));
      expect(dataSync, calls.join("\n")).toBe(true);
      expect(find(calls, new RegExp(`fsync\\(\\d+<${escape(dir)}>\\)`), rename), calls.join("\n")).toBeGreaterThan(rename);
      expect(JSON.parse(await readFile(join(dir, file), "utf8"))).toBeTruthy();
    });
  }
});

describe.skipIf(!straceWorks)("the outbox journal", () => {
  it("appends through O_DSYNC, so each write returns synced, and writes once for all the changes made while the last write was in flight", async () => {
    const out = join(dir, "strace.out");
    const body = `const { OutboxStore } = await import(${JSON.stringify(DIST)} + "/store/outbox-store.js");
      const store = await OutboxStore.open(${JSON.stringify(dir)}, new Date());
      const at = new Date().toISOString();
      const disabled = (n) => ({ op: "disabled", target: "webhook-" + n, at, reason: "test" });
      await Promise.all(Array.from({ length: 100 }, (_, n) => store.record(disabled(n))));
      await store.record(disabled(100));
      await store.close();`;
    await run("strace", [
      "-f",
      "-y",
      "-qq",
      "-e",
      "trace=openat,write,writev,pwrite64,pwritev,fsync,fdatasync",
      "-o",
      out,
      process.execPath,
      "--input-type=module",
      "-e",
      body,
    ]);
    const journal = (await readFile(out, "utf8")).split("\n").filter((line) => line.includes("outbox.jsonl") && !line.includes("resumed>"));
    const opened = journal.filter((line) => /openat\(/.test(line) && !/O_RDONLY/.test(line));
    expect(opened, journal.join("\n")).toHaveLength(1);
    expect(opened[0]).toMatch(/O_DSYNC/);
    const writes = journal.filter((line) => /\b(write|writev|pwrite64|pwritev)\(\d+<[^>]*outbox\.jsonl>/.test(line));
    expect(writes, journal.join("\n")).toHaveLength(2);
    const { OutboxStore } = await import("../../src/store/outbox-store.js");
    expect(Object.keys((await OutboxStore.read(dir, new Date())).disabledTargets)).toHaveLength(101);
  });
});

describe.skipIf(!straceWorks)("a run's final record", () => {
  it("is synced once written; a run's first record only when it creates the history file, with the folders holding the new names", async () => {
    const calls = await traced(
      `const { StateStore } = await import(dist + "/store/state.js");
      const state = await StateStore.open(dir);
      const run = (id) => ({ id, job: "report", reason: "manual", scheduledAt: new Date().toISOString(), startedAt: new Date().toISOString(), status: "running", iterations: 0, toolCalls: 0, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }, sessionId: "cron:report:" + id });
      for (const id of ["r1", "r2"]) {
        await state.saveRun(run(id));
        await state.saveRun({ ...run(id), status: "ok", finishedAt: new Date().toISOString() });
      }
      await state.close();`,
      ["write"],
    );
    const history = escape(join(dir, "runs", "report.jsonl"));
    const lines = (pattern: string) => calls.flatMap((line, i) => (new RegExp(pattern).test(line) ? [i] : []));
    const writes = lines(`^\\d+ +write\\(\\d+<${history}>`);
    const syncs = lines(`f(data)?sync\\(\\d+<${history}>`);
    expect(writes, calls.join("\n")).toHaveLength(4);
    // r1's first record created the file; r2's first record is not waited for; both final records are.
    expect(syncs, calls.join("\n")).toHaveLength(3);
    expect([syncs[0]! > writes[0]!, syncs[1]! > writes[1]!, syncs[2]! > writes[3]!, syncs[1]! < writes[2]!]).toEqual([
      true,
      true,
      true,
      true,
    ]);
    // runs/ and the file were new: runs/ holds the file's name and the state folder runs/'s.
    const folderSyncs = (folder: string) => lines(`fsync\\(\\d+<${escape(folder)}>\\)`).filter((i) => i > syncs[0]! && i < syncs[1]!);
    expect(folderSyncs(join(dir, "runs")), calls.join("\n")).toHaveLength(1);
    expect(folderSyncs(dir), calls.join("\n")).toHaveLength(1);
    const statuses = (await readFile(join(dir, "runs", "report.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { status: string }).status);
    expect(statuses).toEqual(["running", "ok", "running", "ok"]);
  });
});

describe("DurableJSONFile", () => {
  it("ends with the newest of a burst of writes, each resolving once data at least as new is on disk", async () => {
    const file = new DurableJSONFile<{ n: number }>(join(dir, "data.json"));
    const onDisk: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, (_, n) =>
        file.write({ n }).then(async () => onDisk.push(JSON.parse(await readFile(join(dir, "data.json"), "utf8")).n)),
      ),
    );
    expect(await file.read()).toEqual({ n: 19 });
    onDisk.forEach((n, i) => expect(n).toBeGreaterThanOrEqual(i === 0 ? 0 : onDisk[i - 1]!));
    expect(await readdir(dir)).toEqual(["data.json"]);
  });

  it("leaves no temporary file behind when a write fails, and the old file whole", async () => {
    await writeFileDurably(join(dir, "kept.json"), "old\n");
    await expect(writeFileDurably(join(dir, "missing-folder", "kept.json"), "new\n")).rejects.toThrow(/ENOENT/);
    expect(await readFile(join(dir, "kept.json"), "utf8")).toBe("old\n");
    expect(await readdir(dir)).toEqual(["kept.json"]);
  });

  it("reads nothing from a file that does not exist", async () => {
    expect(await new DurableJSONFile(join(dir, "none.json")).read()).toBeNull();
  });
});
