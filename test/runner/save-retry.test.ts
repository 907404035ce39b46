import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it, vi } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import { Runner } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import { StateStore } from "../../src/store/state.js";
import { captureLog } from "../support/log-capture.js";
import { finalRecord } from "../support/runner-jobs.js";

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
  const { log, lines } = captureLog();
  const runner = new Runner({
    job: () => job,
    records: new RunSaver(state, { log }),
    concurrency: 4,
    log,
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  // A file where the folder was: no write under it can succeed, and none can recreate it.
  await rename(dir, `${dir}.aside`);
  await writeFile(dir, "");
  const ended = await Promise.all([1, 2, 3].map(() => finalRecord(runner, { job: "report", reason: "manual", scheduledAt: new Date() })));
  const failures = lines.filter((line) => line.msg === "could not save a run record; kept, saved again later");
  expect(failures).toHaveLength(1);
  expect(failures[0]).toMatchObject({
    level: "error",
    fields: { component: "runner", job: "report", runId: expect.any(String), error: expect.stringMatching(/./), retryInMs: 1000 },
  });

  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await vi.waitFor(() => expect(lines.map((line) => line.msg)).toContain("saved the run records that could not be saved before"), {
    timeout: 10_000,
  });
  const saved = await (await StateStore.open(dir)).runs("report");
  expect(saved.map((r) => [r.id, r.status]).sort()).toEqual(ended.map((r) => [r.id, "ok"]).sort());
  await runner.shutdown(0);
});

it("says which records are lost when countd stops before the state directory is usable again", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "countd-save-retry-")), "state");
  const state = await StateStore.open(dir);
  const { log, lines } = captureLog();
  const runner = new Runner({
    job: () => job,
    records: new RunSaver(state, { log }),
    concurrency: 1,
    log,
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  await rm(dir, { recursive: true });
  await writeFile(dir, "");
  const run = await finalRecord(runner, { job: "report", reason: "manual", scheduledAt: new Date() });
  await runner.shutdown(0);
  expect(lines.at(-1)).toMatchObject({
    level: "error",
    msg: "countd stopped with run records it could not save, now lost",
    fields: { records: 1, runs: [`report/${run.id}`] },
  });
});

it("waits twice as long after each failed try while the outage lasts, and starts again from 1 s after it", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "countd-save-retry-")), "state");
  const state = await StateStore.open(dir);
  const { log, lines } = captureLog();
  const runner = new Runner({
    job: () => job,
    records: new RunSaver(state, { log }),
    concurrency: 1,
    log,
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  const waits = () => lines.map((line) => line.fields["retryInMs"]).filter((wait) => wait !== undefined);
  const breakDir = async () => {
    await rename(dir, `${dir}.aside`);
    await writeFile(dir, "");
  };
  await breakDir();
  await finalRecord(runner, { job: "report", reason: "manual", scheduledAt: new Date() });
  await vi.waitFor(() => expect(waits()).toEqual([1000, 2000, 4000]), { timeout: 15_000, interval: 100 });

  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await vi.waitFor(
    () =>
      expect(lines.at(-1)).toMatchObject({
        level: "info",
        msg: "saved the run records that could not be saved before",
        fields: { records: 1 },
      }),
    { timeout: 15_000, interval: 100 },
  );
  await breakDir();
  await finalRecord(runner, { job: "report", reason: "manual", scheduledAt: new Date() });
  expect(waits()).toEqual([1000, 2000, 4000, 1000]);
  await rm(dir);
  await rename(`${dir}.aside`, dir);
  await runner.shutdown(0);
});
