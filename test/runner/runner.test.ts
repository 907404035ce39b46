import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import { runAgent } from "../../src/runner/execute.js";
import { fireFromTrigger } from "../../src/runner/requests.js";
import { Runner, type RunnerOptions } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import type { RunContext } from "../../src/runner/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { defineTool, ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";
import { heldExecutor } from "../support/held-executor.js";
import { finalRecord, fire, makeJob } from "../support/runner-jobs.js";
import { captureLog } from "../support/log-capture.js";

let stateDir: string;
let state: StateStore;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-runner-"));
  state = await StateStore.open(stateDir);
});

function makeRunner(jobs: Job[], execute: RunnerOptions["execute"], extra: Partial<RunnerOptions> = {}) {
  const byName = new Map(jobs.map((job) => [job.name, job]));
  const { log, lines: logs } = captureLog();
  const runner = new Runner({
    job: (name) => byName.get(name),
    records: new RunSaver(state, { log }),
    execute,
    concurrency: 2,
    log,
    ...extra,
  });
  // Fires as the triggers hand them on, which have no one to tell of a refusal but the log.
  return { runner, logs, jobs: byName, submit: fireFromTrigger(runner, log) };
}

const waitFor = (check: () => void) => vi.waitFor(check, { timeout: 5000, interval: 5 });
const records = async (job: string) => (await StateStore.open(stateDir)).runs(job);

describe("Runner: concurrency", () => {
  it("runs at most `concurrency` jobs at once and starts the waiting ones in arrival order", async () => {
    const names = ["a", "b", "c", "d", "e"];
    const { calls, execute, stats } = heldExecutor();
    const { runner, submit } = makeRunner(
      names.map((n) => makeJob(n)),
      execute,
    );
    for (const name of names) submit(fire(name));

    await waitFor(() => expect(calls).toHaveLength(2));
    expect(runner.active()).toBe(2);
    // One slot at a time frees up, so each next start shows which waiting run got it.
    for (let i = 0; i < names.length; i++) {
      calls[i]!.finish();
      if (i + 2 < names.length) await waitFor(() => expect(calls).toHaveLength(i + 3));
    }
    await waitFor(async () => expect((await records("e"))[0]?.status).toBe("ok"));
    expect(stats.maxInFlight).toBe(2);
    expect(
      calls
        .slice(0, 2)
        .map((c) => c.job.name)
        .sort(),
    ).toEqual(["a", "b"]);
    expect(calls.slice(2).map((c) => c.job.name)).toEqual(["c", "d", "e"]);
  });
});

describe("Runner: overlap", () => {
  it("skip: a fire during a run is recorded as skipped, with its reason, and makes no call", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("report", { overlap: "skip" })], execute);
    submit(fire("report"));
    await waitFor(() => expect(calls).toHaveLength(1));

    const skipped = await finalRecord(runner, fire("report", { reason: "manual" }));
    expect(skipped).toMatchObject({
      status: "skipped",
      reason: "manual",
      error: "a run of this job was still in progress (overlap: skip)",
    });
    calls[0]!.finish();
    await waitFor(async () => expect((await records("report")).map((r) => r.status)).toEqual(["ok", "skipped"]));
    expect(calls).toHaveLength(1);
  });

  it("queue: fires during a run become ONE next run, with every changed file once", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("inbox", { overlap: "queue" })], execute);
    submit(fire("inbox", { reason: "watch", files: ["a.csv"] }));
    await waitFor(() => expect(calls).toHaveLength(1));

    submit(fire("inbox", { reason: "watch", files: ["b.csv"] }));
    submit(fire("inbox", { reason: "watch", files: ["c.csv", "b.csv"] }));
    const merged = finalRecord(runner, fire("inbox", { reason: "watch", files: ["d.csv"] }));
    calls[0]!.finish();
    await waitFor(() => expect(calls).toHaveLength(2));
    expect(calls[1]!.run.request.files).toEqual(["b.csv", "c.csv", "d.csv"]);
    calls[1]!.finish();

    const record = await merged;
    expect(record).toMatchObject({ status: "ok", sessionId: calls[1]!.run.sessionId });
    await runner.shutdown(0);
    // Anything more than the one queued run would show here, cancelled by the shutdown.
    expect((await records("inbox")).map((r) => r.status)).toEqual(["ok", "ok"]);
    expect(calls).toHaveLength(2);
  });

  it("replace: cancels the running run, then starts the newer one; a replaced run is not retried", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("sync", { overlap: "replace", retry: { attempts: 3, backoffMs: 0 } })], execute);
    submit(fire("sync"));
    await waitFor(() => expect(calls).toHaveLength(1));

    const newer = finalRecord(runner, fire("sync", { reason: "manual" }));
    await waitFor(() => expect(calls).toHaveLength(2));
    expect(calls[0]!.run.cancel.cancelled).toBe(true);
    expect(calls[1]!.run.cancel.cancelled).toBe(false);
    calls[1]!.finish();
    expect(await newer).toMatchObject({ status: "ok", reason: "manual" });

    const [first, second] = await records("sync");
    expect(first).toMatchObject({ id: calls[0]!.run.id, status: "cancelled", error: "replaced by a newer run" });
    expect(second).toMatchObject({ id: calls[1]!.run.id, status: "ok" });
    expect(calls).toHaveLength(2);
  });

  it("allow: runs of an isolated-session job run side by side, each in its own session", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("scan", { overlap: "allow" })], execute);
    submit(fire("scan"));
    submit(fire("scan"));
    await waitFor(() => expect(calls).toHaveLength(2));
    expect(runner.active("scan")).toBe(2);
    const sessions = calls.map((c) => c.run.sessionId);
    expect(sessions[0]).not.toBe(sessions[1]);
    for (const [i, call] of calls.entries()) expect(sessions[i]).toBe(`cron:scan:${call.run.id}`);
    for (const call of calls) call.finish();
  });

  it("allow on a shared-session job queues instead, so the session's history never interleaves", async () => {
    const { calls, execute, stats } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("diary", { overlap: "allow", session: "shared" })], execute, { concurrency: 4 });
    submit(fire("diary"));
    await waitFor(() => expect(calls).toHaveLength(1));
    const second = finalRecord(runner, fire("diary"));
    // A run takes its slot as soon as it is accepted; the second one must not have.
    expect(runner.active("diary")).toBe(1);
    calls[0]!.finish();
    await waitFor(() => expect(calls).toHaveLength(2));
    calls[1]!.finish();
    await second;
    expect(stats.maxInFlight).toBe(1);
    expect(calls.map((c) => c.run.sessionId)).toEqual(["cron:diary", "cron:diary"]);
  });
});

describe("Runner: timeout and retries", () => {
  it("cancels a run that outlives its timeout and records it as timeout", async () => {
    const { calls, execute } = heldExecutor();
    const { runner } = makeRunner([makeJob("slow", { timeoutMs: 50 })], execute);
    const record = await finalRecord(runner, fire("slow"));
    expect(record).toMatchObject({ status: "timeout", error: "timed out after 50 ms" });
    expect(calls[0]!.run.cancel.cancelled).toBe(true);
    expect(calls[0]!.run.cancel.signal.reason).toEqual(new Error("timeout"));
  });

  it("retries a failing run after the backoff, up to the number of attempts in total", async () => {
    const starts: RunContext[] = [];
    const ends: boolean[] = [];
    const { runner } = makeRunner(
      [makeJob("flaky", { retry: { attempts: 3, backoffMs: 30 } })],
      async (_job, run) => {
        starts.push(run);
        return { answer: "", status: "error", error: "upstream exploded", iterations: 1, toolCalls: 0, usage: emptyUsage() };
      },
      { beforeRunEnd: async (_job, _run, { willRetry }) => void ends.push(willRetry) },
    );
    const last = await finalRecord(runner, fire("flaky"));
    expect(last).toMatchObject({ status: "error", reason: "retry", error: "upstream exploded" });

    await runner.shutdown(0);
    const runs = await records("flaky");
    expect(runs.map((r) => [r.reason, r.status])).toEqual([
      ["schedule", "error"],
      ["retry", "error"],
      ["retry", "error"],
    ]);
    expect(starts).toHaveLength(3);
    expect(ends).toEqual([true, true, false]);
    for (let i = 1; i < runs.length; i++) {
      // The backoff is a lower bound; a few ms of slack for timer and clock rounding.
      expect(Date.parse(runs[i]!.startedAt) - Date.parse(runs[i - 1]!.finishedAt!)).toBeGreaterThanOrEqual(25);
    }
  });

  it("stops retrying once an attempt succeeds, and retries timeouts too", async () => {
    let attempt = 0;
    const { calls, execute } = heldExecutor();
    const { runner } = makeRunner([makeJob("wobbly", { timeoutMs: 40, retry: { attempts: 5, backoffMs: 1 } })], (job, run) => {
      const outcome = execute(job, run);
      // The first attempt hangs until the timeout cancels it; the second answers.
      if (++attempt === 2) calls[1]!.finish({ answer: "fine now" });
      return outcome;
    });
    expect(await finalRecord(runner, fire("wobbly"))).toMatchObject({ status: "ok", reason: "retry", resultExcerpt: "fine now" });
    await runner.shutdown(0);
    expect((await records("wobbly")).map((r) => r.status)).toEqual(["timeout", "ok"]);
  });
});

describe("Runner: a fire started at a later attempt, watched (a run another cluster node left)", () => {
  it("waits out the backoff, counts attempts on from the one given, tells the watch of each attempt, and records node and attempt", async () => {
    let failures = 0;
    const { runner } = makeRunner(
      [makeJob("flaky", { retry: { attempts: 4, backoffMs: 30 } })],
      async () =>
        ++failures === 1
          ? { answer: "", status: "error", error: "upstream exploded", iterations: 1, toolCalls: 0, usage: emptyUsage() }
          : { answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() },
      { node: "n2" },
    );
    const heard: Array<[string, number, string]> = [];
    const asked = Date.now();
    const end = await runner.request(fire("flaky", { reason: "retry" }), {
      attempt: 2,
      retry: { of: "20261130T090000Z-abcd", backoffMs: 30 },
      watch: {
        started: (run, attempt) => void heard.push(["started", attempt, run.status]),
        queued: (run, attempt) => void heard.push(["queued", attempt, run.status]),
      },
    }).ended;
    expect(end.record).toMatchObject({ status: "ok", reason: "retry", node: "n2", attempt: 3 });
    await runner.shutdown(0);
    const runs = await records("flaky");
    expect(runs.map((r) => [r.reason, r.status, r.attempt, r.node])).toEqual([
      ["retry", "error", 2, "n2"],
      ["retry", "ok", 3, "n2"],
    ]);
    expect(Date.parse(runs[0]!.startedAt) - asked).toBeGreaterThanOrEqual(25);
    expect(heard).toEqual([
      ["started", 2, "running"],
      ["queued", 2, "error"],
      ["started", 3, "running"],
      ["queued", 3, "ok"],
    ]);
  });

  it("does not retry past retry.attempts when started at the last attempt, and a failing watch never fails the run", async () => {
    const { runner, logs } = makeRunner([makeJob("flaky", { retry: { attempts: 2, backoffMs: 0 } })], async () => ({
      answer: "",
      status: "error",
      error: "upstream exploded",
      iterations: 1,
      toolCalls: 0,
      usage: emptyUsage(),
    }));
    const end = await runner.request(fire("flaky"), {
      attempt: 2,
      watch: {
        started: () => {
          throw new Error("Redis is away");
        },
      },
    }).ended;
    expect(end.record).toMatchObject({ status: "error" });
    // Outside a cluster no record says its attempt.
    expect(end.record.attempt).toBeUndefined();
    await runner.shutdown(0);
    expect((await records("flaky")).map((r) => r.status)).toEqual(["error"]);
    expect(logs.some((line) => line.msg === "run listener failed" && line.fields["error"] === "Redis is away")).toBe(true);
  });
});

describe("Runner: records", () => {
  it("saves the record when the run starts and again, complete, when it ends", async () => {
    const clock = () => new Date("2026-11-30T09:00:00.250Z");
    const seenOnDisk: RunRecord[] = [];
    const hooks: string[] = [];
    const { runner, logs } = makeRunner(
      [makeJob("report")],
      async () => {
        seenOnDisk.push(...(await records("report")));
        return {
          answer: "x".repeat(2000),
          status: "ok",
          iterations: 3,
          toolCalls: 2,
          usage: { inputTokens: 120, outputTokens: 45, cachedInputTokens: 10, cacheWriteTokens: 0 },
        };
      },
      {
        now: clock,
        beforeRunEnd: async (job, run, { willRetry }) => void hooks.push(`end ${job.name} ${run.status} willRetry=${willRetry}`),
      },
    );
    const record = await finalRecord(runner, fire("report", { reason: "manual" }));

    expect(record.id).toMatch(/^20261130T090000Z-[0-9a-f]{4}$/);
    expect(seenOnDisk).toEqual([
      {
        id: record.id,
        job: "report",
        reason: "manual",
        scheduledAt: "2026-11-30T09:00:00.000Z",
        startedAt: "2026-11-30T09:00:00.250Z",
        status: "running",
        iterations: 0,
        toolCalls: 0,
        usage: emptyUsage(),
        sessionId: `cron:report:${record.id}`,
      },
    ]);
    const [saved] = await records("report");
    expect(saved).toEqual(record);
    expect(saved).toMatchObject({
      status: "ok",
      finishedAt: "2026-11-30T09:00:00.250Z",
      iterations: 3,
      toolCalls: 2,
      usage: { inputTokens: 120, outputTokens: 45, cachedInputTokens: 10, cacheWriteTokens: 0 },
    });
    expect(saved!.resultExcerpt).toHaveLength(500);
    expect(saved).not.toHaveProperty("error");
    expect(hooks).toEqual(["end report ok willRetry=false"]);
    expect(logs).toContainEqual({
      level: "info",
      msg: "run finished",
      fields: { component: "runner", job: "report", runId: record.id, status: "ok", durationMs: 0 },
    });
  });

  it("records an executor that throws as an error with its message", async () => {
    const { runner } = makeRunner([makeJob("broken")], async () => {
      throw new Error("no provider named glm");
    });
    expect(await finalRecord(runner, fire("broken"))).toMatchObject({ status: "error", error: "no provider named glm" });
  });

  it("awaits beforeRunEnd with the final record before saving it, so what it queues is on disk before the run is recorded as ended", async () => {
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const reached = new Promise<void>((resolve) => (entered = resolve));
    const { runner } = makeRunner(
      [makeJob("report")],
      async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
      {
        beforeRunEnd: async (_job, run) => {
          order.push(`before end ${run.status}`);
          entered();
          await held;
          order.push("queued");
        },
      },
    );
    const ran = finalRecord(runner, fire("report")).then((record) => {
      order.push("run resolved");
      return record;
    });
    await reached;
    // A crash now leaves the run `running`, which the next start marks interrupted: never a
    // finished run whose deliveries were not queued.
    expect((await records("report")).map((r) => r.status)).toEqual(["running"]);

    release();
    expect(await ran).toMatchObject({ status: "ok" });
    expect((await records("report")).map((r) => r.status)).toEqual(["ok"]);
    expect(order).toEqual(["before end ok", "queued", "run resolved"]);
  });

  it("still records the run when beforeRunEnd fails, and logs why", async () => {
    const { runner, logs } = makeRunner(
      [makeJob("report")],
      async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
      {
        beforeRunEnd: async () => {
          throw new Error("disk full");
        },
      },
    );
    const record = await finalRecord(runner, fire("report"));
    expect((await records("report")).map((r) => r.status)).toEqual(["ok"]);
    expect(logs).toContainEqual({
      level: "error",
      msg: "run listener failed",
      fields: { component: "runner", job: "report", runId: record.id, error: "disk full" },
    });
  });

  it("refuses to run a job it does not know", async () => {
    const { runner, submit, logs } = makeRunner([], heldExecutor().execute);
    await expect(finalRecord(runner, fire("nope"))).rejects.toThrow('no job named "nope"');
    submit(fire("nope"));
    expect(logs).toContainEqual(
      expect.objectContaining({
        level: "warn",
        msg: "no job by that name: fire ignored",
        fields: expect.objectContaining({ job: "nope" }),
      }),
    );
  });

  it("names the sessions of the runs in progress, which retention must not prune, until each run ends", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner([makeJob("report"), makeJob("digest", { session: "shared" })], execute);
    submit(fire("report"));
    submit(fire("digest"));
    await waitFor(() => expect(calls).toHaveLength(2));
    const report = calls.find((c) => c.job.name === "report")!;
    expect(runner.sessionsInUse()).toEqual(new Set([report.run.sessionId, "cron:digest"]));

    report.finish();
    await waitFor(() => expect(runner.active("report")).toBe(0));
    expect(runner.sessionsInUse()).toEqual(new Set(["cron:digest"]));
    calls.find((c) => c.job.name === "digest")!.finish();
    await waitFor(() => expect(runner.sessionsInUse()).toEqual(new Set()));
  });
});

describe("Runner: shutdown", () => {
  it("lets a run finish within the grace period, cancels the one that does not, and drops runs not started", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit, logs } = makeRunner(
      ["fast", "slow", "late"].map((n) => makeJob(n)),
      execute,
    );
    submit(fire("fast"));
    submit(fire("slow"));
    submit(fire("late"));
    await waitFor(() => expect(calls).toHaveLength(2));

    const stopped = runner.shutdown(300);
    calls.find((c) => c.job.name === "fast")!.finish();
    await stopped;

    expect((await records("fast"))[0]).toMatchObject({ status: "ok" });
    expect((await records("slow"))[0]).toMatchObject({
      status: "cancelled",
      error: "countd stopped and the run did not finish within the 300 ms grace period",
    });
    expect((await records("late"))[0]).toMatchObject({ status: "cancelled", error: "countd stopped before this run started" });
    expect(calls.map((c) => c.job.name).sort()).toEqual(["fast", "slow"]);
    expect(runner.active()).toBe(0);

    submit(fire("fast"));
    expect(logs.at(-1)).toMatchObject({ msg: "countd is stopping: fire ignored", fields: { job: "fast" } });
    await expect(finalRecord(runner, fire("fast"))).rejects.toThrow('countd is stopping: job "fast" was not run');
  });

  it("cancels a pending retry and the run queued behind a job's current run", async () => {
    const { calls, execute } = heldExecutor();
    const { runner, submit } = makeRunner(
      [makeJob("flaky", { retry: { attempts: 2, backoffMs: 60_000 } }), makeJob("inbox", { overlap: "queue" })],
      execute,
    );
    const retried = finalRecord(runner, fire("flaky"));
    submit(fire("inbox", { reason: "watch", files: ["a.csv"] }));
    await waitFor(() => expect(calls).toHaveLength(2));
    submit(fire("inbox", { reason: "watch", files: ["b.csv"] }));
    calls.find((c) => c.job.name === "flaky")!.finish({ status: "error", error: "boom" });
    await waitFor(async () => expect((await records("flaky"))[0]?.status).toBe("error"));

    const stopped = runner.shutdown(1000);
    calls.find((c) => c.job.name === "inbox")!.finish();
    await stopped;

    expect(await retried).toMatchObject({ reason: "retry", status: "cancelled", error: "countd stopped before this run started" });
    expect((await records("flaky")).map((r) => r.status)).toEqual(["error", "cancelled"]);
    expect((await records("inbox")).map((r) => r.status)).toEqual(["ok", "cancelled"]);
    expect(calls).toHaveLength(2);
  });
});

describe("Runner with the real agent loop", () => {
  const mock = useAimock();

  it("records the iterations, tool calls and token usage of the run, in the run's own session", async () => {
    const readNotes = defineTool({
      name: "read_notes",
      description: "Reads yesterday's notes.",
      parameters: z.object({}),
      async execute() {
        return "- shipped the runner\n- open: retry policy for webhooks";
      },
    });
    mock.addFixture({
      match: { userMessage: "Summarise yesterday's notes", hasToolResult: false },
      response: {
        toolCalls: [{ name: "read_notes", arguments: "{}" }],
        usage: { prompt_tokens: 50, completion_tokens: 8, total_tokens: 58 },
      },
    });
    mock.addFixture({
      match: { userMessage: "Summarise yesterday's notes", hasToolResult: true },
      response: {
        content: "Yesterday: the runner shipped. Open question: retry policy for webhooks.",
        usage: { prompt_tokens: 80, completion_tokens: 15, total_tokens: 95 },
      },
    });
    const { loop, sessions } = await makeAgent("openai", mock, new ToolRegistry().register(readNotes));
    const { runner } = makeRunner([makeJob("daily-report", { prompt: "Summarise yesterday's notes" })], (job, run) =>
      runAgent(loop, job.prompt, run.sessionId, run.cancel),
    );

    const record = await finalRecord(runner, fire("daily-report"));
    expect(record).toMatchObject({
      status: "ok",
      iterations: 2,
      toolCalls: 1,
      usage: { inputTokens: 130, outputTokens: 23, cachedInputTokens: 0, cacheWriteTokens: 0 },
      resultExcerpt: "Yesterday: the runner shipped. Open question: retry policy for webhooks.",
    });
    expect((await records("daily-report"))[0]).toEqual(record);
    const history = await sessions.load(record.sessionId);
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });
});
