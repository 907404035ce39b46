import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EventBus } from "../../src/events.js";
import type { Job } from "../../src/jobs/types.js";
import { Runner, type RunnerOptions } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { heldExecutor } from "../support/held-executor.js";
import { fire, makeJob } from "../support/runner-jobs.js";
import { captureLog } from "../support/log-capture.js";

/*
 * What the console steers the runner with: a fire answered at once (started, queued, skipped),
 * cancelling a run or a waiting retry by id, what runs and waits, paused jobs, and the bus events
 * of each run's start and end. Jobs are paused in the real state store, as the daemon does.
 */

let stateDir: string;
let state: StateStore;
let runners: Runner[];
let held: ReturnType<typeof heldExecutor>;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-requests-"));
  state = await StateStore.open(stateDir);
  runners = [];
  held = heldExecutor();
});

afterEach(async () => {
  for (const call of held.calls) call.finish();
  await Promise.all(runners.map((runner) => runner.shutdown(0)));
  await state.close();
  await rm(stateDir, { recursive: true, force: true });
});

function makeRunner(jobs: Job[], extra: Partial<RunnerOptions> = {}) {
  const byName = new Map(jobs.map((job) => [job.name, job]));
  const { log, lines: logs } = captureLog();
  const listenerErrors: Array<{ event: string; error: string }> = [];
  const events = new EventBus((event, error) => listenerErrors.push({ event, error: (error as Error).message }));
  const runner = new Runner({
    job: (name) => byName.get(name),
    records: new RunSaver(state),
    execute: held.execute,
    concurrency: 2,
    log,
    paused: (name) => state.isPaused(name),
    events,
    ...extra,
  });
  runners.push(runner);
  return { runner, logs, events, listenerErrors };
}

const waitFor = (check: () => unknown) => vi.waitFor(check, { timeout: 5000, interval: 5 });
const records = async (job: string) => (await StateStore.open(stateDir)).runs(job);
const callsOf = (job: string) => held.calls.filter((call) => call.job.name === job);

/** Every run.started and run.finished the bus carries, as the console would hear them. */
function listen(events: EventBus) {
  const heard: Array<{ event: "run.started" | "run.finished"; run: RunRecord }> = [];
  events.on("run.started", ({ run }) => heard.push({ event: "run.started", run }));
  events.on("run.finished", ({ run }) => heard.push({ event: "run.finished", run }));
  return heard;
}

describe("Runner.request: what became of a fire, at once", () => {
  it("started: a run began, with its running record; started and ended follow it", async () => {
    const { runner } = makeRunner([makeJob("report")]);
    const answer = runner.request(fire("report", { reason: "manual" }));

    expect(answer.decision).toBe("started");
    expect(answer.run).toMatchObject({ job: "report", reason: "manual", status: "running" });
    const started = await answer.started;
    expect(started).toEqual(answer.run);
    await waitFor(() => expect(held.calls).toHaveLength(1));
    expect(held.calls[0]!.run.id).toBe(answer.run!.id);

    held.calls[0]!.finish({ answer: "all green" });
    const { record, outcome } = await answer.ended;
    expect(record).toMatchObject({ id: answer.run!.id, status: "ok", resultExcerpt: "all green" });
    expect(outcome).toMatchObject({ answer: "all green", status: "ok" });
    expect(await records("report")).toEqual([record]);
  });

  it("queued under concurrency 1: waits for the slot; started resolves as it starts, ended as it ends", async () => {
    const { runner } = makeRunner([makeJob("first"), makeJob("second")], { concurrency: 1 });
    const first = runner.request(fire("first"));
    const second = runner.request(fire("second"));
    expect(first.decision).toBe("started");
    expect(second).toMatchObject({ decision: "queued" });
    expect(second.run).toBeUndefined();

    let startedYet = false;
    void second.started.then(() => (startedYet = true));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    expect(runner.queued()).toEqual([{ job: "second", reason: "schedule", scheduledAt: "2026-11-30T09:00:00.000Z" }]);
    expect(startedYet).toBe(false);

    callsOf("first")[0]!.finish();
    const started = await second.started;
    expect(started).toMatchObject({ job: "second", status: "running" });
    await waitFor(() => expect(callsOf("second")).toHaveLength(1));
    expect(callsOf("second")[0]!.run.id).toBe(started!.id);
    callsOf("second")[0]!.finish();
    expect((await second.ended).record).toMatchObject({ id: started!.id, status: "ok" });
  });

  it("overlap queue: a fire during the job's run is queued behind it, and runs once it ends", async () => {
    const { runner } = makeRunner([makeJob("inbox", { overlap: "queue" })]);
    const first = runner.request(fire("inbox"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    const second = runner.request(fire("inbox", { reason: "manual" }));
    expect(second.decision).toBe("queued");
    expect(runner.active("inbox")).toBe(1);

    held.calls[0]!.finish();
    expect(await second.started).toMatchObject({ reason: "manual", status: "running" });
    await waitFor(() => expect(held.calls).toHaveLength(2));
    held.calls[1]!.finish();
    expect((await first.ended).record.status).toBe("ok");
    expect((await second.ended).record).toMatchObject({ reason: "manual", status: "ok" });
    expect((await records("inbox")).map((r) => r.status)).toEqual(["ok", "ok"]);
  });

  it("overlap skip: a fire during the job's run is skipped at once with the record saying why; it never starts", async () => {
    const { runner } = makeRunner([makeJob("report", { overlap: "skip" })]);
    runner.request(fire("report"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    const skipped = runner.request(fire("report", { reason: "manual" }));

    expect(skipped.decision).toBe("skipped");
    expect(skipped.run).toMatchObject({
      job: "report",
      reason: "manual",
      status: "skipped",
      error: "a run of this job was still in progress (overlap: skip)",
    });
    expect(await skipped.started).toBeUndefined();
    expect((await skipped.ended).record).toEqual(skipped.run);
    expect((await records("report")).map((r) => [r.status, r.error])).toEqual([
      ["running", undefined],
      ["skipped", "a run of this job was still in progress (overlap: skip)"],
    ]);
    expect(held.calls).toHaveLength(1);
  });

  it("throws at once for a job it does not know, and once countd is stopping", async () => {
    const { runner } = makeRunner([makeJob("report")]);
    expect(() => runner.request(fire("nope"))).toThrow('no job named "nope"');
    await runner.shutdown(0);
    expect(() => runner.request(fire("report"))).toThrow('countd is stopping: job "report" was not run');
  });
});

describe("Runner.cancel", () => {
  it("cancels a running run by id: its record is cancelled with the reason given, and it is not retried", async () => {
    const { runner } = makeRunner([makeJob("sync", { retry: { attempts: 3, backoffMs: 0 } })]);
    const answer = runner.request(fire("sync"));
    await waitFor(() => expect(held.calls).toHaveLength(1));

    expect(runner.cancel(answer.run!.id, "cancelled from the console by alice")).toBe("cancelled");
    expect(held.calls[0]!.run.cancel.cancelled).toBe(true);
    const { record } = await answer.ended;
    expect(record).toMatchObject({ id: answer.run!.id, status: "cancelled", error: "cancelled from the console by alice" });
    expect(await records("sync")).toEqual([record]);
    expect(held.calls).toHaveLength(1);
    expect(runner.running()).toEqual([]);
  });

  it("cancels a retry waiting out its backoff, found by the id of the attempt that failed", async () => {
    const { runner } = makeRunner([makeJob("flaky", { retry: { attempts: 3, backoffMs: 60_000 } })], {
      now: () => new Date("2026-11-30T09:00:05Z"),
    });
    const answer = runner.request(fire("flaky"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    const failedId = answer.run!.id;
    held.calls[0]!.finish({ status: "error", error: "upstream exploded" });
    await waitFor(() => expect(runner.queued()).toHaveLength(1));
    // It says when it would start: a minute, the backoff, after the failure.
    expect(runner.queued()).toEqual([{ job: "flaky", reason: "retry", scheduledAt: "2026-11-30T09:01:05.000Z", retryOf: failedId }]);

    expect(runner.cancel(failedId, "not worth retrying")).toBe("cancelled");
    const { record } = await answer.ended;
    expect(record).toMatchObject({ job: "flaky", reason: "retry", status: "cancelled", error: "not worth retrying" });
    expect(runner.queued()).toEqual([]);
    expect((await records("flaky")).map((r) => [r.reason, r.status, r.error])).toEqual([
      ["schedule", "error", "upstream exploded"],
      ["retry", "cancelled", "not worth retrying"],
    ]);
    // The job is free again: the next fire starts at once.
    const next = runner.request(fire("flaky"));
    expect(next.decision).toBe("started");
    await waitFor(() => expect(held.calls).toHaveLength(2));
    held.calls[1]!.finish();
    expect((await next.ended).record.status).toBe("ok");
  });

  it('answers "not found" for an unknown id and for a run that has ended', async () => {
    const { runner } = makeRunner([makeJob("report")]);
    expect(runner.cancel("20261130T090000Z-0000", "why")).toBe("not found");
    const answer = runner.request(fire("report"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    held.calls[0]!.finish();
    const { record } = await answer.ended;

    expect(runner.cancel(record.id, "too late")).toBe("not found");
    expect(await records("report")).toEqual([expect.objectContaining({ id: record.id, status: "ok" })]);
    expect(record).not.toHaveProperty("error");
  });
});

describe("Runner.running and Runner.queued", () => {
  it("list the runs in progress, and the fires waiting: for a slot in arrival order, behind their job's run, then retries", async () => {
    const jobs = [
      makeJob("flaky", { retry: { attempts: 2, backoffMs: 60_000 } }),
      makeJob("inbox", { overlap: "queue" }),
      makeJob("late-a"),
      makeJob("late-b"),
    ];
    const { runner } = makeRunner(jobs);
    runner.request(fire("flaky"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    callsOf("flaky")[0]!.finish({ status: "error", error: "boom" });
    await waitFor(() => expect(runner.queued()).toHaveLength(1));

    const inbox = runner.request(fire("inbox", { reason: "watch", files: ["a.csv"] }));
    const other = runner.request(fire("late-a", { reason: "manual", scheduledAt: new Date("2026-11-30T09:01:00Z") }));
    runner.request(fire("late-b", { scheduledAt: new Date("2026-11-30T09:02:00Z") }));
    runner.request(fire("inbox", { reason: "watch", scheduledAt: new Date("2026-11-30T09:03:00Z"), files: ["b.csv"] }));
    await waitFor(() => expect(held.calls).toHaveLength(3));

    expect(
      runner
        .running()
        .map((r) => [r.job, r.status])
        .sort(),
    ).toEqual([
      ["inbox", "running"],
      ["late-a", "running"],
    ]);
    expect(
      runner
        .running()
        .map((r) => r.id)
        .sort(),
    ).toEqual([inbox.run!.id, other.run!.id].sort());
    expect(runner.queued()).toEqual([
      { job: "late-b", reason: "schedule", scheduledAt: "2026-11-30T09:02:00.000Z" },
      { job: "inbox", reason: "watch", scheduledAt: "2026-11-30T09:03:00.000Z" },
      { job: "flaky", reason: "retry", scheduledAt: expect.any(String), retryOf: (await records("flaky"))[0]!.id },
    ]);
  });

  it("hand out copies: changing what running() returned changes nothing the runner keeps", async () => {
    const { runner } = makeRunner([makeJob("report")]);
    const answer = runner.request(fire("report"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    const [listed] = runner.running();
    listed!.status = "ok";
    listed!.usage.inputTokens = 999_999;
    listed!.id = "tampered";

    expect(runner.running()).toEqual([answer.run]);
    held.calls[0]!.finish();
    expect((await answer.ended).record).toMatchObject({ id: answer.run!.id, status: "ok", usage: { inputTokens: 0 } });
  });
});

describe("Runner: paused jobs", () => {
  it('records a scheduled fire of a paused job as skipped, "paused", and runs nothing', async () => {
    const { runner } = makeRunner([makeJob("report")]);
    await state.pause("report");
    const answer = runner.request(fire("report"));
    runner.request(fire("report", { reason: "watch", files: ["a.csv"] }));

    expect(answer.decision).toBe("skipped");
    expect(answer.run).toMatchObject({ status: "skipped", reason: "schedule", error: "paused" });
    expect(await answer.started).toBeUndefined();
    expect((await answer.ended).record).toEqual(answer.run);
    await waitFor(async () => expect(await records("report")).toHaveLength(2));
    expect((await records("report")).map((r) => [r.reason, r.status, r.error])).toEqual([
      ["schedule", "skipped", "paused"],
      ["watch", "skipped", "paused"],
    ]);
    expect(held.calls).toHaveLength(0);
  });

  it("skips a fire whose job was paused while it waited for a slot, as it would have started", async () => {
    const { runner } = makeRunner([makeJob("busy"), makeJob("report")], { concurrency: 1 });
    runner.request(fire("busy"));
    const waiting = runner.request(fire("report"));
    expect(waiting.decision).toBe("queued");
    await waitFor(() => expect(held.calls).toHaveLength(1));

    await state.pause("report");
    callsOf("busy")[0]!.finish();
    expect(await waiting.started).toBeUndefined();
    expect((await waiting.ended).record).toMatchObject({ job: "report", status: "skipped", error: "paused" });
    expect(callsOf("report")).toHaveLength(0);
    expect(runner.queued()).toEqual([]);
  });

  it("skips the retry of a scheduled run when the job was paused during its backoff", async () => {
    const { runner } = makeRunner([makeJob("flaky", { retry: { attempts: 2, backoffMs: 50 } })]);
    const answer = runner.request(fire("flaky"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    held.calls[0]!.finish({ status: "error", error: "boom" });
    await waitFor(() => expect(runner.queued()).toHaveLength(1));
    await state.pause("flaky");

    expect((await answer.ended).record).toMatchObject({ reason: "retry", status: "skipped", error: "paused" });
    expect((await records("flaky")).map((r) => [r.reason, r.status])).toEqual([
      ["schedule", "error"],
      ["retry", "skipped"],
    ]);
    expect(held.calls).toHaveLength(1);
  });

  it("runs a manual fire of a paused job, and its retries too", async () => {
    const { runner } = makeRunner([makeJob("flaky", { retry: { attempts: 2, backoffMs: 20 } })]);
    await state.pause("flaky");
    const answer = runner.request(fire("flaky", { reason: "manual" }));
    expect(answer.decision).toBe("started");
    await waitFor(() => expect(held.calls).toHaveLength(1));
    held.calls[0]!.finish({ status: "error", error: "boom" });
    await waitFor(() => expect(held.calls).toHaveLength(2));
    expect(held.calls[1]!.run.request.reason).toBe("retry");
    held.calls[1]!.finish({ answer: "fine now" });

    expect((await answer.ended).record).toMatchObject({ reason: "retry", status: "ok", resultExcerpt: "fine now" });
    expect((await records("flaky")).map((r) => [r.reason, r.status])).toEqual([
      ["manual", "error"],
      ["retry", "ok"],
    ]);
  });

  it("pausing every job skips them all; once resumed, the job's fires run again", async () => {
    const { runner } = makeRunner([makeJob("report")]);
    await state.pause(null);
    expect(runner.request(fire("report")).decision).toBe("skipped");
    await state.resume(null);
    await state.pause("report");
    expect(runner.request(fire("report")).decision).toBe("skipped");

    await state.resume("report");
    const answer = runner.request(fire("report"));
    expect(answer.decision).toBe("started");
    await waitFor(() => expect(held.calls).toHaveLength(1));
    held.calls[0]!.finish();
    expect((await answer.ended).record.status).toBe("ok");
    expect((await records("report")).map((r) => [r.status, r.error])).toEqual([
      ["skipped", "paused"],
      ["skipped", "paused"],
      ["ok", undefined],
    ]);
  });
});

describe("Runner: run.started and run.finished on the bus", () => {
  it("tells each run's start with its running record and its end with the final one, retries included", async () => {
    const { runner, events } = makeRunner([makeJob("flaky", { retry: { attempts: 2, backoffMs: 0 } })]);
    const heard = listen(events);
    const answer = runner.request(fire("flaky"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    expect(heard).toEqual([{ event: "run.started", run: answer.run }]);

    held.calls[0]!.finish({ status: "error", error: "boom" });
    await waitFor(() => expect(held.calls).toHaveLength(2));
    held.calls[1]!.finish({ answer: "done" });
    const { record } = await answer.ended;

    const saved = await records("flaky");
    expect(heard.map(({ event, run }) => [event, run.reason, run.status])).toEqual([
      ["run.started", "schedule", "running"],
      ["run.finished", "schedule", "error"],
      ["run.started", "retry", "running"],
      ["run.finished", "retry", "ok"],
    ]);
    expect(heard.filter((h) => h.event === "run.finished").map((h) => h.run)).toEqual(saved);
    expect(heard.at(-1)!.run).toEqual(record);
  });

  it("tells the end of fires that never started: skipped by overlap, skipped as paused, a retry cancelled in its backoff", async () => {
    const { runner, events } = makeRunner([
      makeJob("report"),
      makeJob("quiet"),
      makeJob("flaky", { retry: { attempts: 2, backoffMs: 60_000 } }),
    ]);
    const heard = listen(events);
    runner.request(fire("report"));
    await waitFor(() => expect(held.calls).toHaveLength(1));
    const skipped = runner.request(fire("report"));
    await state.pause("quiet");
    const paused = runner.request(fire("quiet"));
    const flaky = runner.request(fire("flaky"));
    await waitFor(() => expect(callsOf("flaky")).toHaveLength(1));
    callsOf("flaky")[0]!.finish({ status: "error", error: "boom" });
    await waitFor(() => expect(runner.queued()).toHaveLength(1));
    runner.cancel(flaky.run!.id, "enough");
    await Promise.all([skipped.ended, paused.ended, flaky.ended]);

    const finished = heard.filter((h) => h.event === "run.finished").map(({ run }) => [run.job, run.status, run.error]);
    expect(finished).toEqual(
      expect.arrayContaining([
        ["report", "skipped", "a run of this job was still in progress (overlap: skip)"],
        ["quiet", "skipped", "paused"],
        ["flaky", "error", "boom"],
        ["flaky", "cancelled", "enough"],
      ]),
    );
    expect(finished).toHaveLength(4);
    // Only the runs that ran were started.
    expect(
      heard
        .filter((h) => h.event === "run.started")
        .map(({ run }) => run.job)
        .sort(),
    ).toEqual(["flaky", "report"]);
    expect(heard.find((h) => h.run.job === "quiet")!.run).toEqual((await paused.ended).record);
  });

  it("hands listeners copies: a listener changing a record changes neither the saved record nor what callers get", async () => {
    const { runner, events } = makeRunner([makeJob("report")]);
    const tamper = ({ run }: { run: RunRecord }) => {
      run.status = "error";
      run.error = "tampered";
      run.usage.outputTokens = 12345;
      run.sessionId = "elsewhere";
    };
    events.on("run.started", tamper);
    events.on("run.finished", tamper);
    const answer = runner.request(fire("report"));
    expect(answer.run).toMatchObject({ status: "running", sessionId: `cron:report:${answer.run!.id}` });
    await waitFor(() => expect(held.calls).toHaveLength(1));
    expect(held.calls[0]!.run.sessionId).toBe(`cron:report:${answer.run!.id}`);
    expect(runner.running()).toEqual([answer.run]);
    held.calls[0]!.finish({ usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, cacheWriteTokens: 0 } });

    const { record } = await answer.ended;
    expect(record).toMatchObject({
      status: "ok",
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, cacheWriteTokens: 0 },
      sessionId: answer.run!.sessionId,
    });
    expect(record).not.toHaveProperty("error");
    expect(await records("report")).toEqual([record]);

    // The same for a fire recorded without running.
    await state.pause("report");
    const skipped = runner.request(fire("report"));
    const { record: skippedRecord } = await skipped.ended;
    expect(skippedRecord).toMatchObject({ status: "skipped", error: "paused" });
    expect(skippedRecord).toEqual(skipped.run);
    expect((await records("report")).at(-1)).toEqual(skippedRecord);
  });

  it("reports a listener that throws, the listeners after it still hear, and the run goes on and is recorded", async () => {
    const { runner, events, listenerErrors } = makeRunner([makeJob("report")]);
    events.on("run.started", () => {
      throw new Error("console went away");
    });
    events.on("run.finished", () => {
      throw new Error("console still away");
    });
    const heard = listen(events);
    const answer = runner.request(fire("report"));
    expect(answer.decision).toBe("started");
    await waitFor(() => expect(held.calls).toHaveLength(1));
    held.calls[0]!.finish();
    const { record } = await answer.ended;

    expect(record.status).toBe("ok");
    expect(await records("report")).toEqual([record]);
    expect(runner.running()).toEqual([]);
    expect(listenerErrors).toEqual([
      { event: "run.started", error: "console went away" },
      { event: "run.finished", error: "console still away" },
    ]);
    expect(heard.map(({ event, run }) => [event, run.id])).toEqual([
      ["run.started", record.id],
      ["run.finished", record.id],
    ]);
    // The runner goes on taking fires.
    const next = runner.request(fire("report"));
    expect(next.decision).toBe("started");
    await waitFor(() => expect(held.calls).toHaveLength(2));
    held.calls[1]!.finish();
    expect((await next.ended).record.status).toBe("ok");
  });
});
