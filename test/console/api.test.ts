import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { JobDetail, JobView, RunView, StatsView, StatusView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import {
  consoleFolder,
  daemonsOf,
  endedRun,
  gate,
  SLOW,
  startConsoleDaemon,
  writeJob,
  type ConsoleDaemon,
} from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* The console's JSON API against a real daemon (in this process) and a real LLM server on loopback, through fetch. */

const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** The agent lists the workspace, then answers `answer`: one tool call, two LLM calls. */
function listThenAnswer(answer: string) {
  return (request: ChatCompletionRequest): FixtureResponse =>
    request.messages.some((message) => message.role === "tool")
      ? { content: answer }
      : { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
}

const hookYaml = (url: string) => `deliver:\n  - webhook:\n      url: ${url}\n      secret: \${HOOK_SECRET}\n`;

describe("the console API", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  const receivers: WebhookReceiver[] = [];
  const gates: Array<() => void> = [];
  let env: Record<string, string>;

  beforeEach(() => {
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-console-api-test-key", HOOK_SECRET };
  });
  afterEach(async () => {
    gates.splice(0).forEach((open) => open());
    await daemons.cleanup();
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  });

  async function start(dir: string): Promise<ConsoleDaemon> {
    const started = await startConsoleDaemon(dir, env);
    daemons.started.push(started);
    return started;
  }

  async function receiver(...steps: Parameters<WebhookReceiver["script"]>): Promise<WebhookReceiver> {
    const started = await startWebhookReceiver({ secret: HOOK_SECRET, steps });
    receivers.push(started);
    return started;
  }

  /** An LLM answer to `prompt` held until the test (or its end) lets it go. */
  function hold(prompt: string, answer = "released"): () => void {
    const held = gate();
    gates.push(held.open);
    mock.onMessage(prompt, async () => {
      await held.wait;
      return { content: answer };
    });
    return held.open;
  }

  it("GET /api/status and /api/jobs: the daemon, each job's trigger, next fires in UTC beside the job's zone, and an invalid file with its problem and line", async () => {
    const dir = await consoleFolder({ extra: "timezone: Europe/Berlin\njob_env: [HOOK_SECRET]\n" });
    await writeJob(
      dir,
      "morning",
      'description: The morning report\nschedule: "0 9 * * *"\nprompt: write the report\ntimezone: Asia/Tokyo\n',
    );
    await writeJob(dir, "hello", "prompt: say hello\n");
    await writeJob(dir, "broken", 'prompt: oops\nschedule: "every now and then"\n');
    const console = await start(dir);

    const status = await console.get<StatusView>("/api/status");
    expect(status).toMatchObject({
      up: true,
      pid: process.pid,
      jobs: { loaded: 2, invalid: 1, paused: 0, paused_all: false },
      running: [],
      queued: 0,
      outbox: { pending: 0, dead: 0 },
      today: { runs: 0, failures: 0 },
    });
    // 09:00 in Tokyo; on the wire every time is UTC, and the zone it is shown in is beside it.
    expect(status.next_fires).toEqual([{ job: "morning", at: expect.stringMatching(/T00:00:00\.000Z$/) }]);
    expect(status.timezone).toBe("Europe/Berlin");

    const { jobs } = await console.get<{ jobs: JobView[] }>("/api/jobs");
    expect(jobs.map((job) => job.name)).toEqual(["broken", "hello", "morning"]);
    const [broken, hello, morning] = jobs;
    expect(broken).toMatchObject({ loaded: false, enabled: false, next_fires: [], paused: false });
    expect(broken!.problems).toHaveLength(1);
    expect(broken!.problems[0]).toMatch(/broken\.yaml:2:11: schedule: invalid cron expression "every now and then"/);
    expect(hello).toMatchObject({
      loaded: true,
      enabled: true,
      trigger: "manual",
      timezone: "Europe/Berlin",
      next_fires: [],
      paused: false,
      problems: [],
    });
    expect(morning).toMatchObject({ loaded: true, trigger: "cron 0 9 * * *", timezone: "Asia/Tokyo", description: "The morning report" });
    expect(morning!.next_fires).toHaveLength(3);
    for (const at of morning!.next_fires) expect(at).toMatch(/^\d{4}-\d\d-\d\dT00:00:00\.000Z$/);

    const detail = await console.get<JobDetail>("/api/jobs/morning");
    expect(detail.settings).toMatchObject({
      prompt: "write the report",
      session: "isolated",
      overlap: "skip",
      retry: { attempts: expect.any(Number) },
      deliver: [],
      on_failure: [],
    });
    // An invalid file is found by its name too, with its problem.
    expect((await console.get<JobView>("/api/jobs/broken")).problems).toEqual(broken!.problems);

    const missing = await console.api("/api/jobs/nope");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'no job named "nope"' });
    const noEndpoint = await console.api("/api/nothing-here");
    expect(noEndpoint.status).toBe(404);
    expect(await noEndpoint.json()).toEqual({ error: "no such endpoint: GET /api/nothing-here" });
  });

  it("POST /api/jobs/<name>/run runs the job through the runner (reason manual); GET /api/runs/<id> has its transcript and deliveries", async () => {
    const hooks = await receiver();
    const dir = await consoleFolder({ extra: "job_env: [HOOK_SECRET]\n" });
    await writeFile(join(dir, "workspace", "a.txt"), "alpha\n");
    await writeJob(dir, "lister", `prompt: list the workspace\n${hookYaml(hooks.url)}`);
    mock.onMessage("list the workspace", listThenAnswer("There is **a.txt** and [a link](javascript:alert(1))."));
    const console = await start(dir);

    const { status, body } = await console.post("/api/jobs/lister/run");
    expect(status).toBe(202);
    expect(body).toEqual({ status: "started", run_id: expect.stringMatching(/^\d{8}T\d{6}Z-[0-9a-f]+$/) });
    const run = await endedRun(console, body.run_id);
    expect(run).toMatchObject({ job: "lister", reason: "manual", status: "ok", iterations: 2, toolCalls: 1 });

    let view!: RunView;
    await vi.waitFor(async () => {
      view = await console.get<RunView>(`/api/runs/${run.id}`);
      expect(view.deliveries).toEqual([expect.objectContaining({ status: "delivered" })]);
      expect(view.transcript.steps.filter((step) => step.kind === "llm")).toHaveLength(2);
    }, SLOW);
    expect(view.running).toBe(false);
    expect(view.run).toEqual(run);
    expect(view.transcript.prompt).toContain("list the workspace");
    expect(view.transcript.incomplete).toBeUndefined();
    const tool = view.transcript.steps.find((step) => step.kind === "tool");
    expect(tool).toMatchObject({
      name: "list_dir",
      arguments: { path: "." },
      result: expect.stringContaining("a.txt"),
      attempts: 1,
      duration_ms: expect.any(Number),
    });
    const text = view.transcript.steps.find((step) => step.kind === "text");
    expect(text).toMatchObject({ text: "There is **a.txt** and [a link](javascript:alert(1))." });
    // The page shows the agent's text only as sanitised HTML.
    expect(text!.kind === "text" && text!.html).toContain("<strong>a.txt</strong>");
    expect(text!.kind === "text" && text!.html).not.toContain("javascript:");
    expect(view.transcript.steps.find((step) => step.kind === "llm")).toMatchObject({
      model: expect.any(String),
      usage: { inputTokens: expect.any(Number) },
    });
    expect(view.deliveries).toEqual([
      {
        id: expect.stringMatching(new RegExp(`^lister\\.${run.id}\\.webhook-`)),
        kind: "webhook",
        to: expect.stringContaining(hooks.url),
        status: "delivered",
        delivered_at: expect.any(String),
        attempts: 1,
      },
    ]);
    expect(hooks.acknowledgedIds()).toEqual([view.deliveries[0]!.id]);

    // ?job= names the job, for ids that several jobs share.
    expect((await console.get<RunView>(`/api/runs/${run.id}?job=lister`)).run.id).toBe(run.id);
    const elsewhere = await console.api(`/api/runs/${run.id}?job=other`);
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toEqual({ error: `no run with id "${run.id}" in job "other"` });

    const unknownJob = await console.post("/api/jobs/nope/run");
    expect(unknownJob).toEqual({ status: 404, body: { error: 'no job named "nope"' } });
  });

  it("GET /api/status counts in today every run it shows running, also one that started while it read the history", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "long", "prompt: hold the line\n");
    hold("hold the line");
    const console = await start(dir);
    const { daemon } = console;
    const read = daemon.state.allRuns.bind(daemon.state);
    let started: string | undefined;
    vi.spyOn(daemon.state, "allRuns").mockImplementationOnce(async () => {
      const saved = await read();
      started = (await daemon.runner.request({ job: "long", reason: "manual", scheduledAt: new Date() }).started)?.id;
      return saved;
    });

    const status = await console.get<StatusView>("/api/status");
    expect(started).toEqual(expect.any(String));
    expect(status.running).toEqual([expect.objectContaining({ id: started, job: "long" })]);
    expect(status.today).toMatchObject({ runs: 1, failures: 0, by_status: { running: 1 } });
  });

  it("run now answers started, queued (no free run slot) and skipped 409 (overlap: skip); ?wait=start answers once the run starts", async () => {
    const dir = await consoleFolder({ runner: "  concurrency: 1\n" });
    await writeJob(dir, "long", "prompt: hold the line\n");
    await writeJob(dir, "quick", "prompt: be quick\n");
    await writeJob(dir, "patient", "prompt: be patient\n");
    const release = hold("hold the line");
    mock.onMessage("be quick", { content: "quick answer" });
    mock.onMessage("be patient", { content: "patient answer" });
    const console = await start(dir);

    const long = await console.post("/api/jobs/long/run");
    expect(long).toEqual({ status: 202, body: { status: "started", run_id: expect.any(String) } });

    const queued = await console.post("/api/jobs/quick/run");
    expect(queued.status).toBe(202);
    expect(queued.body).toEqual({ status: "queued", message: expect.stringContaining("queued") });

    const skipped = await console.post("/api/jobs/long/run");
    expect(skipped.status).toBe(409);
    expect(skipped.body).toEqual({
      status: "skipped",
      run_id: expect.any(String),
      message: "a run of this job was still in progress (overlap: skip)",
    });
    expect((await console.get<RunView>(`/api/runs/${skipped.body.run_id}?job=long`)).run).toMatchObject({
      status: "skipped",
      reason: "manual",
    });

    const status = await console.get<StatusView>("/api/status");
    expect(status.running).toEqual([expect.objectContaining({ id: long.body.run_id, job: "long", reason: "manual" })]);
    expect(status.queued).toBe(1);

    const waited = console.api("/api/jobs/patient/run?wait=start", { method: "POST" });
    release();
    const started = await waited;
    expect(started.status).toBe(202);
    const startedBody = (await started.json()) as { status: string; run_id: string };
    expect(startedBody).toEqual({ status: "started", run_id: expect.any(String) });

    expect(await endedRun(console, long.body.run_id, "long")).toMatchObject({ status: "ok", resultExcerpt: "released" });
    expect(await endedRun(console, startedBody.run_id, "patient")).toMatchObject({
      status: "ok",
      reason: "manual",
      resultExcerpt: "patient answer",
    });
    const quick = await console.get<{ runs: RunRecord[] }>("/api/runs?job=quick");
    expect(quick.runs).toEqual([expect.objectContaining({ status: "ok", reason: "manual" })]);
  });

  it("POST /api/runs/<id>/cancel cancels a running run: status cancelled with the reason; a run not in progress is 409", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "long", "prompt: hold the line\n");
    hold("hold the line");
    const console = await start(dir);
    const { body } = await console.post("/api/jobs/long/run");
    // Cancelled from the console at once: found although its record may not be saved yet.
    expect((await console.get<RunView>(`/api/runs/${body.run_id}`)).running).toBe(true);
    await vi.waitFor(
      async () =>
        expect((await console.get<StatusView>("/api/status")).running).toEqual([
          expect.objectContaining({ id: body.run_id, iteration: 1 }),
        ]),
      SLOW,
    );

    const cancel = await console.post(`/api/runs/${body.run_id}/cancel`);
    expect(cancel).toEqual({ status: 200, body: { run_id: body.run_id, job: "long", status: "cancelling" } });
    const run = await endedRun(console, body.run_id);
    expect(run).toMatchObject({ status: "cancelled", error: "cancelled from the console" });

    const again = await console.post(`/api/runs/${body.run_id}/cancel`);
    expect(again).toEqual({ status: 409, body: { error: `run ${body.run_id} of long is not in progress (cancelled)` } });
    const unknown = await console.post("/api/runs/20200101T000000Z-0000/cancel");
    expect(unknown).toEqual({ status: 404, body: { error: 'no run with id "20200101T000000Z-0000"' } });
  });

  it("pause is persisted across a restart and shown in /api/jobs; a paused job's due slots are recorded skipped (paused); run now still runs it", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "ticker", 'schedule: "* * * * * *"\nprompt: tick\n');
    await writeJob(dir, "other", "prompt: say hello\n");
    mock.onMessage("tick", { content: "tock" });
    mock.onMessage("say hello", { content: "hello" });
    let console = await start(dir);
    await vi.waitFor(
      async () => expect((await console.get<{ runs: RunRecord[] }>("/api/runs?job=ticker&status=ok")).runs.length).toBeGreaterThan(0),
      SLOW,
    );

    expect(await console.post("/api/jobs/ticker/pause")).toEqual({ status: 200, body: { job: "ticker", paused: true } });
    const paused = await console.get<JobDetail>("/api/jobs/ticker");
    expect(paused).toMatchObject({ paused: true, paused_at: expect.any(String) });
    expect((await console.get<StatusView>("/api/status")).jobs).toMatchObject({ paused: 1, paused_all: false });
    const pausedAt = paused.paused_at!;

    // Every slot after the pause is in the history, skipped with the reason "paused".
    let after: RunRecord[] = [];
    await vi.waitFor(async () => {
      after = (await console.get<{ runs: RunRecord[] }>("/api/runs?job=ticker&limit=500")).runs.filter((run) => run.scheduledAt > pausedAt);
      expect(after.length).toBeGreaterThanOrEqual(2);
    }, SLOW);
    for (const run of after) expect(run).toMatchObject({ status: "skipped", error: "paused", reason: "schedule" });

    // Asked for by hand, a paused job runs.
    const manual = await console.post("/api/jobs/ticker/run");
    expect(manual.body.status).toBe("started");
    expect(await endedRun(console, manual.body.run_id, "ticker")).toMatchObject({ status: "ok", reason: "manual" });

    await console.stop();
    console = await start(dir);
    const { jobs } = await console.get<{ jobs: JobView[] }>("/api/jobs");
    expect(jobs.find((job) => job.name === "ticker")).toMatchObject({ paused: true, paused_at: pausedAt });
    expect(jobs.find((job) => job.name === "other")).toMatchObject({ paused: false });

    expect(await console.post("/api/jobs/ticker/resume")).toEqual({ status: 200, body: { job: "ticker", paused: false } });
    const resumedAt = new Date().toISOString();
    await vi.waitFor(async () => {
      const runs = (await console.get<{ runs: RunRecord[] }>("/api/runs?job=ticker&status=ok")).runs;
      expect(runs.some((run) => run.reason === "schedule" && run.scheduledAt > resumedAt)).toBe(true);
    }, SLOW);
    expect((await console.get<JobView>("/api/jobs/ticker")).paused).toBe(false);
    expect(await console.post("/api/jobs/nope/pause")).toEqual({ status: 404, body: { error: 'no job named "nope"' } });
  });

  it("POST /api/pause pauses every job (the kill switch) until POST /api/resume; resuming one job then leaves it paused", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "a", "prompt: say a\n");
    await writeJob(dir, "b", "prompt: say b\n");
    const console = await start(dir);
    expect(await console.post("/api/pause")).toEqual({ status: 200, body: { paused_all: true } });
    const { jobs } = await console.get<{ jobs: JobView[] }>("/api/jobs");
    expect(jobs.map((job) => job.paused)).toEqual([true, true]);
    expect((await console.get<StatusView>("/api/status")).jobs).toMatchObject({ paused: 2, paused_all: true });
    expect(await console.post("/api/jobs/a/resume")).toEqual({ status: 200, body: { job: "a", paused: true } });

    await console.stop();
    const restarted = await start(dir);
    expect((await restarted.get<StatusView>("/api/status")).jobs.paused_all).toBe(true);
    expect(await restarted.post("/api/resume")).toEqual({ status: 200, body: { paused_all: false } });
    expect((await restarted.get<{ jobs: JobView[] }>("/api/jobs")).jobs.map((job) => job.paused)).toEqual([false, false]);
  });

  it("GET /api/runs pages newest first with a `next` cursor, filters by job and status, and names a bad value in a JSON 400", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "hello", "prompt: say hello\n");
    await writeJob(dir, "fails", "prompt: fail please\nretry:\n  attempts: 1\n");
    mock.onMessage("say hello", { content: "hello" });
    mock.onMessage("fail please", { error: { message: "no such model", type: "invalid_request_error" }, status: 400 });
    const console = await start(dir);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { body } = await console.post("/api/jobs/hello/run");
      await endedRun(console, body.run_id, "hello");
      ids.push(body.run_id);
    }
    const failed = await console.post("/api/jobs/fails/run");
    expect(await endedRun(console, failed.body.run_id, "fails")).toMatchObject({ status: "error" });

    const all = await console.get<{ runs: RunRecord[]; next?: string }>("/api/runs");
    expect(all.runs.map((run) => run.id)).toEqual([failed.body.run_id, ...[...ids].reverse()]);
    expect(all.next).toBeUndefined();

    const first = await console.get<{ runs: RunRecord[]; next?: string }>("/api/runs?job=hello&limit=2");
    expect(first.runs.map((run) => run.id)).toEqual([ids[2], ids[1]]);
    expect(first.next).toEqual(expect.any(String));
    const second = await console.get<{ runs: RunRecord[]; next?: string }>(
      `/api/runs?job=hello&limit=2&before=${encodeURIComponent(first.next!)}`,
    );
    expect(second.runs.map((run) => run.id)).toEqual([ids[0]]);
    expect(second.next).toBeUndefined();

    expect((await console.get<{ runs: RunRecord[] }>("/api/runs?status=error")).runs.map((run) => run.id)).toEqual([failed.body.run_id]);
    expect((await console.get<{ runs: RunRecord[] }>("/api/runs?status=ok")).runs).toHaveLength(3);
    expect((await console.get<{ runs: RunRecord[] }>("/api/runs?job=nobody")).runs).toEqual([]);

    for (const [query, named] of [
      ["status=exploded", '"exploded"'],
      ["limit=0", '"0"'],
      ["limit=ten", '"ten"'],
    ] as const) {
      const answer = await console.api(`/api/runs?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
      const { error } = (await answer.json()) as { error: string };
      expect(error).toContain(named);
    }
    expect(((await (await console.api("/api/runs?status=exploded")).json()) as { error: string }).error).toBe(
      'status must be one of running, waiting, ok, error, timeout, cancelled, skipped, interrupted, budget, got "exploded"',
    );
    const missing = await console.api("/api/runs/20200101T000000Z-abcd");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'no run with id "20200101T000000Z-abcd"' });

    const stats = await console.get<{
      timezone: string;
      days: Array<{ date: string; by_status: object }>;
      runs: Array<{ id: string; status: string }>;
    }>("/api/stats?days=7");
    expect(stats.days).toHaveLength(7);
    expect(stats.days.at(-1)).toMatchObject({ date: expect.any(String), by_status: { ok: 3, error: 1 } });
    // Each run's point only for one job's charts.
    expect(stats.runs).toEqual([]);
    const hello = await console.get<{ runs: Array<{ id: string; status: string }> }>("/api/stats?job=hello&days=7");
    expect(hello.runs.map((run) => run.id)).toEqual(ids);
    expect((await console.api("/api/stats?days=0")).status).toBe(400);
    expect(await (await console.api("/api/stats?days=many")).json()).toEqual({
      error: 'days must be a whole number from 1 to 90, got "many"',
    });
    expect((await console.api("/api/stats?job=nope")).status).toBe(404);

    const status = await console.get<StatusView>("/api/status");
    expect(status.today).toMatchObject({ runs: 4, failures: 1, by_status: { ok: 3, error: 1 } });
  });

  it("shows what runs cost: each run's cost and model, each LLM call's, today's spend by job (a run in progress's so far) and per day; an unpriced model counts apart, a budget stop as a failure", async () => {
    // OpenRouter's shape of OpenAI's API, in which aimock reports cached and cache-written input.
    env = { ...env, OPENAI_BASE_URL: `${mock.url}/api/v1` };
    const dir = await consoleFolder({ extra: "prices:\n  gpt-4o-mini: { input: 2, cached_input: 0.5, cache_write: 2.5, output: 8 }\n" });
    await writeJob(dir, "cached", "prompt: list the workspace\n");
    await writeJob(dir, "local", "prompt: answer locally\nmodel: unlisted-local-model\n");
    await writeJob(dir, "capped", "prompt: list the workspace again\nbudget:\n  per_run: 0.001\n");
    await writeJob(dir, "slow", "prompt: list slowly\n");
    // Each call: 400 of its 1,000 input tokens read from the cache and 200 written to it, so
    // (400 × $2 + 400 × $0.50 + 200 × $2.50 + 100 × $8) per million = $0.0023.
    const usage = { prompt_tokens: 1_000, completion_tokens: 100, prompt_tokens_details: { cached_tokens: 400, cache_write_tokens: 200 } };
    const CALL = 0.0023;
    const listing = listThenAnswer("one file");
    for (const prompt of ["list the workspace", "answer locally"]) mock.onMessage(prompt, (request) => ({ ...listing(request), usage }));
    // Its second call is held: the run is in progress, its first call spent.
    const second = gate();
    gates.push(second.open);
    mock.onMessage("list slowly", async (request) => {
      if (request.messages.some((message) => message.role === "tool")) await second.wait;
      return { ...listing(request), usage };
    });
    const console = await start(dir);
    const ran = async (job: string) => endedRun(console, (await console.post(`/api/jobs/${job}/run`)).body.run_id, job);

    const cached = await ran("cached");
    const local = await ran("local");
    const capped = await ran("capped");
    expect(cached).toMatchObject({
      status: "ok",
      model: "gpt-4o-mini",
      usage: { inputTokens: 2_000, outputTokens: 200, cachedInputTokens: 800, cacheWriteTokens: 400 },
    });
    expect(cached.cost).toBeCloseTo(2 * CALL, 12);
    expect(local).toMatchObject({ status: "ok", model: "unlisted-local-model", cost: null });
    // The first call crossed the cap: the second is not made.
    expect(capped).toMatchObject({ status: "budget", iterations: 1, error: expect.stringContaining("per-run budget") });
    expect(capped.cost).toBeCloseTo(CALL, 12);

    const { runs } = await console.get<{ runs: RunRecord[] }>("/api/runs");
    expect(runs.map((run) => [run.job, run.status, run.model, run.cost])).toEqual([
      ["capped", "budget", "gpt-4o-mini", capped.cost],
      ["local", "ok", "unlisted-local-model", null],
      ["cached", "ok", "gpt-4o-mini", cached.cost],
    ]);
    expect((await console.get<{ runs: RunRecord[] }>("/api/runs?status=budget")).runs.map((run) => run.id)).toEqual([capped.id]);

    let view!: RunView;
    await vi.waitFor(async () => {
      view = await console.get<RunView>(`/api/runs/${cached.id}`);
      expect(view.transcript.steps.filter((step) => step.kind === "llm")).toHaveLength(2);
    }, SLOW);
    expect(view.run).toMatchObject({ cost: cached.cost, model: "gpt-4o-mini" });
    for (const step of view.transcript.steps.filter((step) => step.kind === "llm")) {
      expect(step).toMatchObject({
        model: "gpt-4o-mini",
        usage: { inputTokens: 1_000, cachedInputTokens: 400, cacheWriteTokens: 200, outputTokens: 100 },
      });
      expect(step.cost).toBeCloseTo(CALL, 12);
    }
    await vi.waitFor(async () => {
      const steps = (await console.get<RunView>(`/api/runs/${local.id}`)).transcript.steps.filter((step) => step.kind === "llm");
      expect(steps).toEqual([
        expect.objectContaining({ model: "unlisted-local-model", cost: null }),
        expect.objectContaining({ cost: null }),
      ]);
    }, SLOW);
    expect((await console.get<RunView>(`/api/runs/${capped.id}`)).run).toMatchObject({ status: "budget", error: capped.error });

    const { today, budget } = await console.get<StatusView>("/api/status");
    expect(today).toMatchObject({ runs: 3, failures: 1, by_status: { ok: 2, budget: 1 }, unpriced: 1 });
    // What the daily budgets count: every call so far (5 of them, the unpriced model's tokens too).
    expect(budget).toMatchObject({ timezone: expect.any(String), date: expect.stringMatching(/^\d{4}-\d\d-\d\d$/), tokens: 5 * 1_100 });
    expect(budget.cost).toBeCloseTo(3 * CALL, 12);
    expect(today.cost).toBeCloseTo(3 * CALL, 12);
    expect(today.tokens).toEqual({ inputTokens: 5_000, outputTokens: 500, cachedInputTokens: 2_000, cacheWriteTokens: 1_000 });
    expect(today.by_job).toEqual({
      cached: { cost: cached.cost, unpriced: 0, tokens: cached.usage },
      local: { cost: 0, unpriced: 1, tokens: local.usage },
      capped: { cost: capped.cost, unpriced: 0, tokens: capped.usage },
    });

    const stats = await console.get<StatsView>("/api/stats?days=2");
    expect(stats.days.at(-1)).toMatchObject({ by_status: { ok: 2, budget: 1 }, unpriced: 1 });
    expect(stats.days.at(-1)!.cost).toBeCloseTo(3 * CALL, 12);
    expect(stats.days[0]).toMatchObject({ cost: 0, unpriced: 0 });
    expect((await console.get<StatsView>("/api/stats?job=local&days=1")).runs).toEqual([
      expect.objectContaining({ id: local.id, cost: null }),
    ]);

    const slow = (await console.post("/api/jobs/slow/run")).body.run_id as string;
    await vi.waitFor(async () => {
      const status = await console.get<StatusView>("/api/status");
      expect(status.running).toEqual([
        expect.objectContaining({
          id: slow,
          usage: { inputTokens: 1_000, outputTokens: 100, cachedInputTokens: 400, cacheWriteTokens: 200 },
          cost: expect.closeTo(CALL, 12),
        }),
      ]);
      expect(status.today.by_job["slow"]).toEqual({ cost: expect.closeTo(CALL, 12), unpriced: 0, tokens: status.running[0]!.usage });
      expect(status.today.cost).toBeCloseTo(4 * CALL, 12);
    }, SLOW);
    second.open();
    expect((await endedRun(console, slow, "slow")).cost).toBeCloseTo(2 * CALL, 12);
  });

  it("GET /api/outbox shows a dead delivery with its attempts and last error; POST /api/outbox/<id>/retry sends it again", async () => {
    const hooks = await receiver(400);
    const dir = await consoleFolder({ extra: "job_env: [HOOK_SECRET]\n" });
    await writeJob(dir, "notify", `prompt: notify me\n${hookYaml(hooks.url)}`);
    mock.onMessage("notify me", { content: "something happened" });
    const console = await start(dir);
    const { body } = await console.post("/api/jobs/notify/run");
    await endedRun(console, body.run_id);

    let outbox!: { pending: Array<Record<string, unknown>>; dead: Array<Record<string, unknown>>; disabled_targets: string[] };
    await vi.waitFor(async () => {
      outbox = await console.get("/api/outbox");
      expect(outbox.dead).toHaveLength(1);
    }, SLOW);
    const [dead] = outbox.dead;
    expect(dead).toMatchObject({
      kind: "webhook",
      to: expect.stringContaining(hooks.url),
      status: "dead",
      attempts: 1,
      last_error: expect.stringContaining("400"),
      job: "notify",
      run_id: body.run_id,
    });
    expect(JSON.stringify(outbox)).not.toContain(HOOK_SECRET);
    expect((await console.get<StatusView>("/api/status")).outbox).toEqual({ pending: 0, dead: 1 });
    expect((await console.get<RunView>(`/api/runs/${body.run_id}`)).deliveries).toEqual([
      expect.objectContaining({ id: dead!["id"], status: "dead", attempts: 1 }),
    ]);

    expect(await console.post(`/api/outbox/${dead!["id"]}/retry`)).toEqual({ status: 200, body: { id: dead!["id"], retried: 1 } });
    await vi.waitFor(() => expect(hooks.acknowledgedIds()).toEqual([dead!["id"]]), SLOW);
    await vi.waitFor(async () => expect(await console.get("/api/outbox")).toEqual({ pending: [], dead: [], disabled_targets: [] }), SLOW);
    expect((await console.get<RunView>(`/api/runs/${body.run_id}`)).deliveries).toEqual([
      expect.objectContaining({ id: dead!["id"], status: "delivered" }),
    ]);

    const again = await console.post(`/api/outbox/${dead!["id"]}/retry`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/was acknowledged at .*; a delivered message is not sent again/);
    const unknown = await console.post("/api/outbox/no-such-delivery/retry");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toContain('no pending or dead delivery with id "no-such-delivery"');
  });
});
