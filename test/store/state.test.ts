import { appendFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { RUNS_KEPT_PER_JOB, StateStore } from "../../src/store/state.js";
import { captureLog } from "../support/log-capture.js";

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

const historyFile = (job: string) => join(dir, "runs", `${job}.jsonl`);
const lines = async (job: string) => (await readFile(historyFile(job), "utf8")).split("\n").filter((line) => line !== "");
const stateOnDisk = async () => JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as Record<string, unknown>;
const ids = async (state: StateStore, job: string) => (await state.runs(job)).map((r) => r.id);
const quarantine = async () =>
  (await readFile(join(dir, "quarantine.jsonl"), "utf8").catch(() => ""))
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("StateStore", () => {
  it("replaces a run saved again under the same id instead of adding a second one, also after a reopen", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("report", "r1", "running"));
    await state.saveRun(record("report", "r2"));
    await state.saveRun({ ...record("report", "r1"), finishedAt: "2026-11-30T09:01:00.000Z", iterations: 3 });
    const expected = [
      expect.objectContaining({ id: "r1", status: "ok", iterations: 3, finishedAt: "2026-11-30T09:01:00.000Z" }),
      expect.objectContaining({ id: "r2", status: "ok" }),
    ];
    expect(await state.runs("report")).toEqual(expected);
    expect(await (await StateStore.open(dir)).runs("report")).toEqual(expected);
    expect(await lines("report")).toHaveLength(3);
  });

  it(`keeps only the newest ${RUNS_KEPT_PER_JOB} runs of a job, and other jobs' runs apart`, async () => {
    const state = await StateStore.open(dir);
    for (let i = 0; i < RUNS_KEPT_PER_JOB + 5; i++) await state.saveRun(record("busy", `r${i}`));
    await state.saveRun(record("quiet", "q0"));
    const reopened = await StateStore.open(dir);
    const busy = await ids(reopened, "busy");
    expect(busy).toHaveLength(RUNS_KEPT_PER_JOB);
    expect(busy[0]).toBe("r5");
    expect(busy.at(-1)).toBe(`r${RUNS_KEPT_PER_JOB + 4}`);
    expect(await ids(reopened, "quiet")).toEqual(["q0"]);
  });

  it(`rewrites a history file holding more than ${2 * RUNS_KEPT_PER_JOB} lines down to the kept runs`, async () => {
    const state = await StateStore.open(dir);
    for (let i = 0; i < 2 * RUNS_KEPT_PER_JOB; i++) await state.saveRun(record("busy", `r${i}`));
    expect(await lines("busy")).toHaveLength(2 * RUNS_KEPT_PER_JOB);
    await state.saveRun(record("busy", `r${2 * RUNS_KEPT_PER_JOB}`));
    const kept = await lines("busy");
    expect(kept).toHaveLength(RUNS_KEPT_PER_JOB);
    expect(JSON.parse(kept[0]!)).toMatchObject({ id: `r${RUNS_KEPT_PER_JOB + 1}` });
    expect(await ids(await StateStore.open(dir), "busy")).toEqual(
      Array.from({ length: RUNS_KEPT_PER_JOB }, (_, i) => `r${RUNS_KEPT_PER_JOB + 1 + i}`),
    );
  });

  it("skips a line cut short by a crash and keeps the runs saved after it", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("torn", "t1"));
    await appendFile(historyFile("torn"), JSON.stringify(record("torn", "t2")).slice(0, 40));

    const reopened = await StateStore.open(dir);
    expect(await ids(reopened, "torn")).toEqual(["t1"]);
    await reopened.saveRun(record("torn", "t3"));
    expect(await ids(await StateStore.open(dir), "torn")).toEqual(["t1", "t3"]);
  });

  it("marks runs left running by a crash as interrupted, on disk, and leaves finished ones alone", async () => {
    const before = await StateStore.open(dir);
    await before.saveRun(record("a", "a1", "running"));
    await before.saveRun(record("a", "a2", "running"));
    await before.saveRun(record("a", "a2", "ok"));
    await before.saveRun(record("b", "b1", "running"));
    // Start-up reads only the files of runs in progress: this one would fail to read.
    await mkdir(historyFile("idle"));

    const after = await StateStore.open(dir);
    expect(await after.markInterrupted(new Date("2026-11-30T10:00:00Z"))).toHaveLength(2);
    const reopened = await StateStore.open(dir);
    const a = await reopened.runs("a");
    expect(a).toEqual([
      expect.objectContaining({
        id: "a1",
        status: "interrupted",
        finishedAt: "2026-11-30T10:00:00.000Z",
        error: "countd stopped while this run was in progress",
      }),
      expect.objectContaining({ id: "a2", status: "ok" }),
    ]);
    expect(a[1]).not.toHaveProperty("error");
    expect((await reopened.runs("b"))[0]!.status).toBe("interrupted");
    expect(reopened.data.running).toEqual({});
    expect(await reopened.markInterrupted(new Date())).toHaveLength(0);
  });

  it("drops an index entry whose run never reached its history file", async () => {
    await writeFile(join(dir, "state.json"), JSON.stringify({ running: { "gone/g1": { job: "gone", id: "g1" } } }));
    const state = await StateStore.open(dir);
    expect(await state.markInterrupted(new Date())).toHaveLength(0);
    expect((await stateOnDisk())["running"]).toEqual({});
    expect(await state.runs("gone")).toEqual([]);
  });

  it("keeps job state, the heartbeat's check-ins among it, and runs across a reopen", async () => {
    const state = await StateStore.open(dir);
    await state.update((data) => {
      data.jobs["once"] = { lastScheduledAt: "2026-12-01T01:00:00.000Z", done: true };
      data.jobs["@heartbeat"] = {
        checkIns: { delivered: [{ at: "2026-11-30T09:00:00.000Z", hash: "abc" }], lastContactAt: "2026-11-30T08:00:00.000Z" },
      };
    });
    await state.saveRun(record("once", "o1"));

    const reopened = await StateStore.open(dir);
    expect(reopened.job("once")).toEqual({ lastScheduledAt: "2026-12-01T01:00:00.000Z", done: true });
    expect(reopened.job("never-seen")).toEqual({});
    expect(await ids(reopened, "once")).toEqual(["o1"]);
    expect(reopened.job("@heartbeat").checkIns).toEqual({
      delivered: [{ at: "2026-11-30T09:00:00.000Z", hash: "abc" }],
      lastContactAt: "2026-11-30T08:00:00.000Z",
    });
  });

  it("loses no write when many updates run at once", async () => {
    const state = await StateStore.open(dir);
    await Promise.all([
      ...Array.from({ length: 50 }, (_, i) => state.saveRun(record(`job${i % 5}`, `r${i}`, i % 2 === 0 ? "running" : "ok"))),
      ...Array.from({ length: 20 }, (_, i) =>
        state.update((data) => {
          data.jobs[`job${i}`] = { lastScheduledAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString() };
        }),
      ),
    ]);
    const reopened = await StateStore.open(dir);
    expect(await reopened.allRuns()).toHaveLength(50);
    expect(Object.keys(reopened.data.jobs)).toHaveLength(20);
    expect(Object.keys(reopened.data.running)).toHaveLength(25);
  });

  it("saves a run's start and end in call order even when the end is not awaited after the start", async () => {
    const state = await StateStore.open(dir);
    const started = state.saveRun(record("x", "x1", "running"));
    const ended = state.saveRun(record("x", "x1", "ok"));
    await Promise.all([started, ended]);
    const reopened = await StateStore.open(dir);
    expect(await reopened.markInterrupted(new Date())).toHaveLength(0);
    expect((await reopened.runs("x"))[0]!.status).toBe("ok");
  });

  it("close() resolves once every save is on disk, the running index's cleanup that saveRun does not wait for included", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("x", "x1", "running"));
    expect((await stateOnDisk())["running"]).toEqual({ "x/x1": { job: "x", id: "x1" } });
    await state.saveRun(record("x", "x1", "ok"));
    await state.close();
    expect((await stateOnDisk())["running"]).toEqual({});
  });

  it("close() also waits for an update nobody awaited (a fire's last slot), so the folder can be removed after it", async () => {
    const state = await StateStore.open(dir);
    void state.update((data) => void (data.jobs["report"] = { lastScheduledAt: "2026-03-02T08:00:00.000Z" }));
    await state.close();
    expect((await stateOnDisk())["jobs"]).toEqual({ report: { lastScheduledAt: "2026-03-02T08:00:00.000Z" } });
    await rm(dir, { recursive: true });
  });

  it("knows the id of a run from the moment it is handed to saveRun", async () => {
    const state = await StateStore.open(dir);
    const saving = state.saveRun(record("x", "x1"));
    expect(state.knownRunIds("x")).toEqual(["x1"]);
    await saving;
    expect(state.knownRunIds("x")).toEqual(["x1"]);
    expect(state.knownRunIds("y")).toEqual([]);
  });

  it("keeps state.json small however many jobs keep a history", async () => {
    const state = await StateStore.open(dir);
    const jobs = Array.from({ length: 1_000 }, (_, i) => `job-${i}`);
    await state.update((data) => {
      for (const job of jobs) data.jobs[job] = { lastScheduledAt: "2026-11-30T09:00:00.000Z" };
    });
    for (let n = 0; n < 10; n++) {
      // A hundred at a time: all thousand at once could run out of file descriptors.
      for (let from = 0; from < jobs.length; from += 100) {
        const batch = jobs.slice(from, from + 100);
        await Promise.all(batch.map((job) => state.saveRun({ ...record(job, `r${n}`), resultExcerpt: "All services green. ".repeat(15) })));
      }
    }
    expect((await stat(join(dir, "state.json"))).size).toBeLessThan(200_000);
    const reopened = await StateStore.open(dir);
    expect(await ids(reopened, "job-999")).toEqual(Array.from({ length: 10 }, (_, n) => `r${n}`));
    expect(await reopened.allRuns()).toHaveLength(10_000);
  });

  it("refuses a job name that is not one, naming it", async () => {
    const state = await StateStore.open(dir);
    await expect(state.runs("../escape")).rejects.toThrow('"../escape" is not a job name');
  });

  it("keeps the heartbeat's runs in runs/@heartbeat.jsonl, beside the jobs' and listed with them", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("@heartbeat", "h1", "running"));
    await state.saveRun(record("@heartbeat", "h1", "ok"));
    await state.saveRun(record("report", "r1"));
    expect(await lines("@heartbeat")).toHaveLength(2);
    const reopened = await StateStore.open(dir);
    expect(await reopened.markInterrupted(new Date())).toEqual([]);
    expect((await reopened.allRuns()).map((r) => [r.job, r.id, r.status])).toEqual(
      expect.arrayContaining([
        ["@heartbeat", "h1", "ok"],
        ["report", "r1", "ok"],
      ]),
    );
  });

  it("moves aside, with a warning, running-index entries it cannot resolve, and starts with the rest", async () => {
    await (await StateStore.open(dir)).saveRun(record("report", "r1", "running"));
    await writeFile(
      join(dir, "state.json"),
      JSON.stringify({
        running: { "report/r1": { job: "report", id: "r1" }, "../x/1": { job: "../x", id: "1" }, "a/1": { job: "b", id: "1" } },
      }),
    );
    const { log, lines: logged } = captureLog();
    const state = await StateStore.open(dir, { log });
    const warnings = logged.filter((line) => line.level === "warn");
    expect((await state.markInterrupted(new Date())).map((r) => r.id)).toEqual(["r1"]);
    const quarantined = await quarantine();
    expect(quarantined.map((q) => q["where"])).toEqual(["running.../x/1", "running.a/1"]);
    expect(quarantined[0]).toMatchObject({ file: join(dir, "state.json"), value: { job: "../x", id: "1" } });
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatchObject({
      fields: {
        component: "state",
        file: join(dir, "state.json"),
        where: "running.../x/1",
        problem: expect.stringMatching(/^does not fit/),
      },
    });
    expect(await stateOnDisk()).toEqual({ jobs: {}, running: {} });
  });
  it("skips history lines that are no run record of the job, with a warning, and moves them aside when the file is rewritten", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("busy", "b0"));
    await appendFile(historyFile("busy"), `{"id": 7}\n${JSON.stringify(record("other", "o1"))}\n{"id":"b1","job":"bu`);
    const { log, lines: logged } = captureLog();
    const reopened = await StateStore.open(dir, { log });
    expect(await ids(reopened, "busy")).toEqual(["b0"]);
    const skipped = (where: string, problem: unknown) => ({
      level: "warn",
      msg: "run history line cannot be used; skipped",
      fields: { component: "state", file: historyFile("busy"), where, problem },
    });
    expect(logged.filter((line) => line.level === "warn")).toMatchObject([
      skipped("line 2", expect.stringMatching(/^does not fit: at id: /)),
      skipped("line 3", 'is a run of "other", not of "busy"'),
      skipped("line 4", "is not JSON (cut short by a crash, or edited by hand)"),
    ]);
    for (let i = 1; i <= 2 * RUNS_KEPT_PER_JOB; i++) await reopened.saveRun(record("busy", `b${i}`));
    expect((await quarantine()).map((q) => [q["file"], q["where"]])).toEqual([
      [historyFile("busy"), "line 2"],
      [historyFile("busy"), "line 3"],
      [historyFile("busy"), "line 4"],
    ]);
    expect(new Set((await lines("busy")).map((line) => (JSON.parse(line) as RunRecord).job))).toEqual(new Set(["busy"]));
  });

  it("moves aside the pieces of a wrong-shaped state.json and keeps the pieces that fit", async () => {
    const shapes: Array<[unknown, string[]]> = [
      [{ jobs: null }, ["jobs"]],
      ["str", ["the whole file"]],
      [[1, 2], ["the whole file"]],
      [null, ["the whole file"]],
      [
        {
          jobs: {
            a: { lastScheduledAt: "2026-11-30T09:00:00.000Z" },
            b: 5,
            c: { done: "yes" },
            "@heartbeat": { checkIns: { delivered: [{ at: "2026-11-30T09:00:00.000Z", hash: "h" }, "x"], lastContactAt: 3 } },
          },
          running: [],
          extra: true,
        },
        ["jobs.b", "jobs.c", "jobs.@heartbeat.checkIns.delivered.1", "jobs.@heartbeat.checkIns.lastContactAt", "running", "extra"],
      ],
    ];
    for (const [shape, where] of shapes) {
      dir = await mkdtemp(join(tmpdir(), "countd-state-"));
      await writeFile(join(dir, "state.json"), JSON.stringify(shape));
      const state = await StateStore.open(dir);
      expect(
        (await quarantine()).map((q) => q["where"]),
        JSON.stringify(shape),
      ).toEqual(where);
      expect(Object.keys(state.data).sort()).toEqual(["jobs", "running"]);
      expect(await stateOnDisk()).toEqual(state.data);
    }
    const state = await StateStore.open(dir);
    expect(state.job("a")).toEqual({ lastScheduledAt: "2026-11-30T09:00:00.000Z" });
    expect(state.job("@heartbeat")).toEqual({ checkIns: { delivered: [{ at: "2026-11-30T09:00:00.000Z", hash: "h" }] } });
    expect(await quarantine()).toHaveLength(6);
  });

  it("names the history file it cannot read when a run in progress needs it", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("a", "a1", "running"));
    await rm(historyFile("a"));
    await mkdir(historyFile("a"));
    await expect((await StateStore.open(dir)).markInterrupted(new Date())).rejects.toThrow(
      `cannot read the run history file ${historyFile("a")}: EISDIR`,
    );
  });

  it("names the state file when it is not valid JSON", async () => {
    await writeFile(join(dir, "state.json"), '{"jobs": {');
    await expect(StateStore.open(dir)).rejects.toThrow(`the state file ${join(dir, "state.json")} is not valid JSON`);
  });

  it("records a run's end in a history folder created again after it was removed while the run went on", async () => {
    const state = await StateStore.open(dir);
    await state.saveRun(record("x", "x1", "running"));
    await rm(join(dir, "runs"), { recursive: true });
    await state.saveRun(record("x", "x1", "ok"));
    await state.close();
    expect((await (await StateStore.open(dir)).runs("x")).map((r) => r.status)).toEqual(["ok"]);
  });

  it("creates the state directory when it does not exist yet", async () => {
    const nested = join(dir, "a", "b");
    const state = await StateStore.open(nested);
    await state.saveRun(record("x", "x1"));
    expect(await (await StateStore.open(nested)).runs("x")).toHaveLength(1);
  });
});
