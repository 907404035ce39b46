import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/runner/types.js";
import { RUNS_KEPT_PER_JOB, StateStore } from "../../src/store/state.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-state-"));
});

function record(job: string, id: string, status: RunRecord["status"] = "ok"): RunRecord {
  return {
    id,
    job,
    reason: "schedule",
    scheduledAt: "2026-11-30T09:00:00.000Z",
    startedAt: "2026-11-30T09:00:00.100Z",
    status,
    iterations: 0,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `cron:${job}:${id}`,
  };
}

describe("StateStore", () => {
  it("replaces a run saved again under the same id instead of adding a second one", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("report", "r1", "running"));
    await state.saveRun({ ...record("report", "r1"), finishedAt: "2026-11-30T09:01:00.000Z", iterations: 3 });
    const reopened = await StateStore.open(dir);
    expect(reopened.runs("report")).toEqual([
      expect.objectContaining({ id: "r1", status: "ok", iterations: 3, finishedAt: "2026-11-30T09:01:00.000Z" }),
    ]);
  });

  it(`keeps only the newest ${RUNS_KEPT_PER_JOB} runs of a job, and other jobs' runs apart`, async () => {
    const state = await StateStore.open(dir);
    for (let i = 0; i < RUNS_KEPT_PER_JOB + 5; i++) await state.saveRun(record("busy", `r${i}`));
    await state.saveRun(record("quiet", "q0"));
    const reopened = await StateStore.open(dir);
    const ids = reopened.runs("busy").map((r) => r.id);
    expect(ids).toHaveLength(RUNS_KEPT_PER_JOB);
    expect(ids[0]).toBe("r5");
    expect(ids.at(-1)).toBe(`r${RUNS_KEPT_PER_JOB + 4}`);
    expect(reopened.runs("quiet").map((r) => r.id)).toEqual(["q0"]);
  });

  it("marks runs left running by a crash as interrupted, on disk, and leaves finished ones alone", async () => {
    const before = await StateStore.open(dir);
    await before.saveRun(record("a", "a1", "running"));
    await before.saveRun(record("a", "a2", "ok"));
    await before.saveRun(record("b", "b1", "running"));

    const after = await StateStore.open(dir);
    expect(await after.markInterrupted(new Date("2026-11-30T10:00:00Z"))).toBe(2);
    const reopened = await StateStore.open(dir);
    expect(reopened.runs("a")).toEqual([
      expect.objectContaining({
        id: "a1",
        status: "interrupted",
        finishedAt: "2026-11-30T10:00:00.000Z",
        error: "countd stopped while this run was in progress",
      }),
      expect.objectContaining({ id: "a2", status: "ok" }),
    ]);
    expect(reopened.runs("a")[1]).not.toHaveProperty("error");
    expect(reopened.runs("b")[0]!.status).toBe("interrupted");
    expect(await reopened.markInterrupted(new Date())).toBe(0);
  });

  it("keeps job state, runs and heartbeat state across a reopen", async () => {
    const state = await StateStore.open(dir);
    await state.update((data) => {
      data.jobs["once"] = { lastScheduledAt: "2026-12-01T01:00:00.000Z", done: true };
      data.heartbeat.delivered.push({ at: "2026-11-30T09:00:00.000Z", hash: "abc" });
      data.heartbeat.lastContactAt = "2026-11-30T08:00:00.000Z";
    });
    await state.saveRun(record("once", "o1"));

    const reopened = await StateStore.open(dir);
    expect(reopened.job("once")).toEqual({ lastScheduledAt: "2026-12-01T01:00:00.000Z", done: true });
    expect(reopened.job("never-seen")).toEqual({});
    expect(reopened.runs("once").map((r) => r.id)).toEqual(["o1"]);
    expect(reopened.data.heartbeat).toEqual({
      delivered: [{ at: "2026-11-30T09:00:00.000Z", hash: "abc" }],
      lastContactAt: "2026-11-30T08:00:00.000Z",
    });
  });

  it("loses no write when many updates run at once", async () => {
    const state = await StateStore.open(dir);
    await Promise.all([
      ...Array.from({ length: 50 }, (_, i) => state.saveRun(record(`job${i % 5}`, `r${i}`))),
      ...Array.from({ length: 20 }, (_, i) =>
        state.update((data) => {
          data.jobs[`job${i}`] = { lastScheduledAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString() };
        }),
      ),
    ]);
    const onDisk = JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as {
      runs: Record<string, RunRecord[]>;
      jobs: Record<string, unknown>;
    };
    expect(Object.values(onDisk.runs).flat()).toHaveLength(50);
    expect(Object.keys(onDisk.jobs)).toHaveLength(20);
  });

  it("names the state file when it is not valid JSON", async () => {
    await writeFile(join(dir, "state.json"), '{"jobs": {');
    await expect(StateStore.open(dir)).rejects.toThrow(`the state file ${join(dir, "state.json")} is not valid JSON`);
  });

  it("creates the state directory when it does not exist yet", async () => {
    const nested = join(dir, "a", "b");
    const state = await StateStore.open(nested);
    await state.saveRun(record("x", "x1"));
    expect((await StateStore.open(nested)).runs("x")).toHaveLength(1);
  });
});
