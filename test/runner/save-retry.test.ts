import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it, vi } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import type { LogFn } from "../../src/log.js";
import { emptyUsage } from "../../src/providers/types.js";
import { Runner } from "../../src/runner/runner.js";
import { StateStore } from "../../src/store/state.js";

const job: Job = {
  name: "report",
  file: "/jobs/report.yaml",
  timezone: "UTC",
  prompt: "report",
  ...jobDefaults(),
  timeoutMs: 60_000,
  overlap: "allow",
  catchUpMs: 0,
  retry: { attempts: 1, backoffMs: 0 },
};

it("keeps the records it could not save while the state directory is unusable, and saves them once it is back", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "countd-save-retry-")), "state");
  const state = await StateStore.open(dir);
  const logged: string[] = [];
  const log: LogFn = (level, message) => logged.push(`${level}: ${message}`);
  const runner = new Runner({
    job: () => job,
    state,
    concurrency: 4,
    log,
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  // A file where the folder was: no write under it can succeed, and none can recreate it.
  await rename(dir, `${dir}.aside`);
  await writeFile(dir, "");
  const ended = await Promise.all([1, 2, 3].map(() => runner.run({ job: "report", reason: "manual", scheduledAt: new Date() })));
  expect(logged.filter((line) => line.includes("could not save the record of run"))).toHaveLength(1);
  expect(logged.join("\n")).toMatch(/^error: could not save the record of run \S+: .*; kept, saved again in 1s$/m);

  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await vi.waitFor(() => expect(logged.join("\n")).toContain("run record(s) that could not be saved before"), { timeout: 10_000 });
  const saved = await (await StateStore.open(dir)).runs("report");
  expect(saved.map((r) => [r.id, r.status]).sort()).toEqual(ended.map((r) => [r.id, "ok"]).sort());
  await runner.shutdown(0);
});

it("says which records are lost when countd stops before the state directory is usable again", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "countd-save-retry-")), "state");
  const state = await StateStore.open(dir);
  const logged: string[] = [];
  const runner = new Runner({
    job: () => job,
    state,
    concurrency: 1,
    log: (level, message) => logged.push(`${level}: ${message}`),
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  await rm(dir, { recursive: true });
  await writeFile(dir, "");
  const run = await runner.run({ job: "report", reason: "manual", scheduledAt: new Date() });
  await runner.shutdown(0);
  expect(logged.at(-1)).toBe(`error: countd stopped with 1 run record(s) it could not save, now lost: report/${run.id}`);
});

it("waits twice as long after each failed try while the outage lasts, and starts again from 1 s after it", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "countd-save-retry-")), "state");
  const state = await StateStore.open(dir);
  const logged: string[] = [];
  const runner = new Runner({
    job: () => job,
    state,
    concurrency: 1,
    log: (level, message) => logged.push(`${level}: ${message}`),
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  const waits = () => logged.map((line) => /(?:saved again|next try) in (\S+)$/.exec(line)?.[1]).filter((wait) => wait !== undefined);
  const breakDir = async () => {
    await rename(dir, `${dir}.aside`);
    await writeFile(dir, "");
  };
  await breakDir();
  await runner.run({ job: "report", reason: "manual", scheduledAt: new Date() });
  await vi.waitFor(() => expect(waits()).toEqual(["1s", "2s", "4s"]), { timeout: 15_000, interval: 100 });

  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await vi.waitFor(() => expect(logged.at(-1)).toBe("info: saved 1 run record(s) that could not be saved before"), { timeout: 15_000, interval: 100 });
  await breakDir();
  await runner.run({ job: "report", reason: "manual", scheduledAt: new Date() });
  expect(waits()).toEqual(["1s", "2s", "4s", "1s"]);
  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await runner.shutdown(0);
});
