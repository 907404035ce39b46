import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { getMetricsFromIterator, type PromHistogramData, type PromMetrics } from "prom2javascript";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Metrics } from "../../src/console/metrics.js";
import { EventBus } from "../../src/events.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, endedRun, SLOW, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* GET /metrics of a real daemon (in this process) after real runs against an LLM server on loopback, read with a Prometheus text parser. */

const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const hookYaml = (url: string) => `deliver:\n  - webhook:\n      url: ${url}\n      secret: \${HOOK_SECRET}\n`;
const soon = () => `${new Date(Date.now() + 2_000).toISOString().slice(0, 19)}Z`;

/** The agent lists the workspace, then answers: one tool call, two LLM calls. */
function listThenAnswer(request: ChatCompletionRequest): FixtureResponse {
  return request.messages.some((message) => message.role === "tool")
    ? { content: "two files" }
    : { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
}

/**
 * prom2javascript reads no NaN, which prom-client writes for the event loop's lag until it has a
 * sample (Prometheus reads it): those lines are left out.
 */
async function parse(text: string): Promise<PromMetrics> {
  return getMetricsFromIterator(
    text
      .split("\n")
      .filter((line) => !/ Nan$/.test(line))
      [Symbol.iterator](),
  );
}

/** The series of `name` whose labels include `labels`. */
function series<T extends { labels: Record<string, string> }>(
  metrics: PromMetrics,
  name: string,
  labels: Record<string, string> = {},
): T[] {
  const data = (metrics[name]?.data ?? []) as unknown as T[];
  return data.filter((entry) => Object.entries(labels).every(([key, value]) => (entry.labels[key] ?? "") === value));
}

/** The value of the one series of `name` with exactly these labels; 0 when there is none. */
function value(metrics: PromMetrics, name: string, labels: Record<string, string> = {}): number {
  const found = series<{ labels: Record<string, string>; value: number }>(metrics, name, labels).filter((entry) =>
    Object.keys(entry.labels).every((key) => key in labels),
  );
  expect(found.length).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

const histogramCount = (metrics: PromMetrics, name: string, labels: Record<string, string>) =>
  series<PromHistogramData>(metrics, name, labels).reduce((sum, entry) => sum + entry.count, 0);

describe("GET /metrics", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  const receivers: WebhookReceiver[] = [];
  let env: Record<string, string>;

  beforeEach(() => {
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-metrics-test-key", HOOK_SECRET };
  });
  afterEach(async () => {
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

  async function scrape(console: ConsoleDaemon): Promise<PromMetrics> {
    const response = await console.api("/metrics");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    return parse(await response.text());
  }

  async function runNow(console: ConsoleDaemon, job: string): Promise<RunRecord> {
    const { body } = await console.post(`/api/jobs/${job}/run`);
    return endedRun(console, body.run_id, job);
  }

  it("counts runs, LLM calls and tokens, tool calls and deliveries as they happened, reads the outbox and the job files when scraped, and keeps counting across a reload", async () => {
    const ok = await receiver();
    const refusing = await receiver(400);
    const dir = await consoleFolder({ extra: "job_env: [HOOK_SECRET]\n" });
    await writeJob(dir, "hello", `prompt: list the files\n${hookYaml(ok.url)}`);
    await writeJob(dir, "notify", `prompt: notify me\n${hookYaml(refusing.url)}`);
    await writeJob(dir, "fails", "prompt: fail please\nretry:\n  attempts: 1\n");
    await writeJob(dir, "timed", `at: "${soon()}"\nprompt: on time\n`);
    await writeJob(dir, "quiet", "prompt: never asked\n");
    await writeJob(dir, "broken", 'prompt: oops\nschedule: "every now and then"\n');
    mock.onMessage("list the files", listThenAnswer);
    mock.onMessage("notify me", { content: "something happened" });
    mock.onMessage("on time", { content: "right on time" });
    mock.onMessage("fail please", { error: { message: "no such model", type: "invalid_request_error" }, status: 400 });
    const console = await start(dir);
    const model = console.daemon.config.provider.model;

    const hello = await runNow(console, "hello");
    const notify = await runNow(console, "notify");
    const fails = await runNow(console, "fails");
    expect([hello.status, notify.status, fails.status]).toEqual(["ok", "ok", "error"]);
    expect(await console.post("/api/jobs/quiet/pause")).toMatchObject({ status: 200 });
    let timed!: RunRecord;
    await vi.waitFor(async () => {
      [timed] = await console.get<{ runs: RunRecord[] }>("/api/runs?job=timed").then((page) => page.runs);
      expect(timed?.status).toBe("ok");
    }, SLOW);
    await vi.waitFor(() => expect(ok.acknowledgedIds()).toHaveLength(1), SLOW);
    await vi.waitFor(async () => expect((await console.get("/api/outbox")).dead).toHaveLength(1), SLOW);

    const metrics = await scrape(console);
    for (const [job, status, reason] of [
      ["hello", "ok", "manual"],
      ["notify", "ok", "manual"],
      ["fails", "error", "manual"],
      ["timed", "ok", "schedule"],
    ]) {
      expect(value(metrics, "countd_runs_total", { job_name: job!, status: status!, reason: reason! })).toBe(1);
      expect(histogramCount(metrics, "countd_run_duration_seconds", { job_name: job! })).toBe(1);
    }
    expect(series(metrics, "countd_runs_total")).toHaveLength(4);
    expect(series(metrics, "countd_fire_lateness_seconds").map((entry) => entry.labels)).toEqual([{ job_name: "timed" }]);
    expect(histogramCount(metrics, "countd_fire_lateness_seconds", { job_name: "timed" })).toBe(1);

    expect(value(metrics, "countd_llm_requests_total", { job_name: "hello", model })).toBe(2);
    expect(value(metrics, "countd_llm_requests_total", { job_name: "fails", model })).toBe(1);
    expect(value(metrics, "countd_llm_failures_total", { job_name: "fails", model })).toBe(1);
    expect(value(metrics, "countd_llm_failures_total", { job_name: "hello", model })).toBe(0);
    for (const run of [hello, notify, timed]) {
      expect(value(metrics, "countd_llm_tokens_total", { job_name: run.job, model, type: "input" })).toBe(run.usage.inputTokens);
      expect(value(metrics, "countd_llm_tokens_total", { job_name: run.job, model, type: "output" })).toBe(run.usage.outputTokens);
      expect(value(metrics, "countd_llm_tokens_total", { job_name: run.job, model, type: "cached" })).toBe(run.usage.cachedInputTokens);
      expect(value(metrics, "countd_llm_tokens_total", { job_name: run.job, model, type: "cache_write" })).toBe(run.usage.cacheWriteTokens);
    }
    expect(hello.usage.outputTokens).toBeGreaterThan(0);

    expect(series(metrics, "countd_tool_calls_total").map(({ labels, value }: any) => ({ labels, value }))).toEqual([
      { labels: { tool: "list_dir", status: "ok" }, value: 1 },
    ]);
    expect(value(metrics, "countd_deliveries_total", { kind: "webhook", status: "queued" })).toBe(2);
    expect(value(metrics, "countd_deliveries_total", { kind: "webhook", status: "delivered" })).toBe(1);
    expect(value(metrics, "countd_deliveries_total", { kind: "webhook", status: "dead" })).toBe(1);
    expect(value(metrics, "countd_outbox_pending")).toBe(0);
    expect(value(metrics, "countd_outbox_dead")).toBe(1);

    expect(value(metrics, "countd_jobs", { state: "valid" })).toBe(5);
    expect(value(metrics, "countd_jobs", { state: "invalid" })).toBe(1);
    expect(value(metrics, "countd_jobs_paused")).toBe(1);
    expect(series(metrics, "countd_last_success_timestamp_seconds").map(({ labels, value }: any) => ({ labels, value }))).toEqual(
      expect.arrayContaining(
        [hello, notify, timed].map((run) => ({ labels: { job_name: run.job }, value: Date.parse(run.finishedAt!) / 1000 })),
      ),
    );
    expect(series(metrics, "countd_last_success_timestamp_seconds")).toHaveLength(3);
    expect(value(metrics, "process_cpu_seconds_total")).toBeGreaterThan(0);

    await console.daemon.reload();
    const again = await runNow(console, "hello");
    const after = await scrape(console);
    expect(value(after, "countd_runs_total", { job_name: "hello", status: "ok", reason: "manual" })).toBe(2);
    expect(value(after, "countd_llm_requests_total", { job_name: "hello", model })).toBe(4);
    expect(value(after, "countd_tool_calls_total", { tool: "list_dir", status: "ok" })).toBe(2);
    expect(value(after, "countd_last_success_timestamp_seconds", { job_name: "hello" })).toBe(Date.parse(again.finishedAt!) / 1000);
  });

  it("prices LLM calls: USD by job and model for priced ones, unpriced calls counted apart, tokens by type with the cached and cache-written input", async () => {
    // OpenRouter's shape of OpenAI's API, in which aimock reports cached and cache-written input.
    env = { ...env, OPENAI_BASE_URL: `${mock.url}/api/v1` };
    const dir = await consoleFolder({ extra: "prices:\n  gpt-4o-mini: { input: 2, cached_input: 0.5, cache_write: 2.5, output: 8 }\n" });
    await writeJob(dir, "priced", "prompt: list the files\n");
    await writeJob(dir, "local", "prompt: list the files locally\nmodel: unlisted-local-model\n");
    const usage = { prompt_tokens: 1_000, completion_tokens: 100, prompt_tokens_details: { cached_tokens: 400, cache_write_tokens: 200 } };
    mock.onMessage("list the files", (request) => ({ ...listThenAnswer(request), usage }));
    const console = await start(dir);

    const priced = await runNow(console, "priced");
    const local = await runNow(console, "local");
    expect([priced.status, local.status]).toEqual(["ok", "ok"]);
    const metrics = await scrape(console);
    // Two calls of (400 × $2 + 400 × $0.50 + 200 × $2.50 + 100 × $8) per million tokens.
    expect(value(metrics, "countd_llm_cost_usd_total", { job_name: "priced", model: "gpt-4o-mini" })).toBeCloseTo(0.0046, 12);
    expect(value(metrics, "countd_llm_cost_usd_total", { job_name: "priced", model: "gpt-4o-mini" })).toBeCloseTo(priced.cost!, 12);
    expect(series(metrics, "countd_llm_cost_usd_total")).toHaveLength(1);
    expect(series(metrics, "countd_llm_unpriced_calls_total").map(({ labels, value }: any) => ({ labels, value }))).toEqual([
      { labels: { job_name: "local", model: "unlisted-local-model" }, value: 2 },
    ]);
    for (const [run, model] of [
      [priced, "gpt-4o-mini"],
      [local, "unlisted-local-model"],
    ] as const) {
      const tokens = (type: string) => value(metrics, "countd_llm_tokens_total", { job_name: run.job, model, type });
      expect([tokens("input"), tokens("cached"), tokens("cache_write"), tokens("output")]).toEqual([2_000, 800, 400, 200]);
    }
  });

  it("answers 401 without the token, and opens to anyone with console.metrics_public while the API still needs the token", async () => {
    const closed = await start(await consoleFolder());
    const refused = await fetch(`${closed.origin}/metrics`);
    expect(refused.status).toBe(401);
    expect((await refused.json()).error).toContain("console.metrics_public");
    expect((await fetch(`${closed.origin}/metrics`, { headers: { authorization: "Bearer not-the-token" } })).status).toBe(401);

    const open = await start(await consoleFolder({ console: '  listen: "127.0.0.1:0"\n  metrics_public: true\n' }));
    const scraped = await fetch(`${open.origin}/metrics`);
    expect(scraped.status).toBe(200);
    expect(value(await parse(await scraped.text()), "countd_jobs", { state: "valid" })).toBe(0);
    expect((await fetch(`${open.origin}/api/status`)).status).toBe(401);
  });

  it("counts heartbeat ticks skipped outside the active hours by that reason, without an LLM call", async () => {
    const hour = new Date().getUTCHours();
    const hh = (h: number) => String(h % 24).padStart(2, "0");
    const heartbeat = `heartbeat:\n  enabled: true\n  every: 100ms\n  timezone: UTC\n  active_hours: "${hh(hour + 2)}:00-${hh(hour + 3)}:00"\n  deliver:\n    - email:\n        to: [ada@example.com]\n`;
    const console = await start(await consoleFolder({ extra: heartbeat }));

    await vi.waitFor(async () => {
      const metrics = await scrape(console);
      expect(
        value(metrics, "countd_heartbeat_decisions_total", { outcome: "skipped", reason: "outside_active_hours" }),
      ).toBeGreaterThanOrEqual(2);
      expect(series(metrics, "countd_heartbeat_decisions_total")).toHaveLength(1);
    }, SLOW);
    expect(mock.getRequests()).toEqual([]);
  });
});

describe("countd_node_info", () => {
  const sources = {
    events: new EventBus(),
    outbox: { counts: () => ({ pending: 0, dead: 0 }) },
    jobs: { files: () => [], all: () => [] },
    state: { isPaused: () => false, runs: async () => [] },
  };

  it("names the node in a cluster, always 1; a daemon alone has none", async () => {
    const node = new Metrics({ ...sources, node: "web-1" });
    const alone = new Metrics(sources);
    const metrics = await parse(await node.scrape());
    expect(value(metrics, "countd_node_info", { node: "web-1" })).toBe(1);
    expect(series(metrics, "countd_node_info")).toHaveLength(1);
    expect((await parse(await alone.scrape()))["countd_node_info"]).toBeUndefined();
    node.close();
    alone.close();
  });
});
