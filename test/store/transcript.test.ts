import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { openPipeline, type Pipeline } from "../../src/runner/pipeline.js";
import { openRuntime, type Runtime } from "../../src/runtime.js";
import { sessionFileName } from "../../src/sessions/file-names.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { readTranscript, type TranscriptStep } from "../../src/store/transcript.js";
import { useAimock } from "../support/aimock.js";
import { finalRecord } from "../support/runner-jobs.js";

/*
 * Runs go through the agent loop as the daemon wires it (config → runtime → pipeline → runner)
 * against an LLM server on loopback, so each run's journal is the real one; readTranscript then
 * reads each run's transcript from it. Everything is closed before anything is read.
 */

const ORDERS = ["id,customer,total", ...Array.from({ length: 120 }, (_, i) => `${1000 + i},customer-${i},${(i * 7.25).toFixed(2)}`)].join(
  "\n",
);
const MODEL = "gpt-4o-mini";

describe("readTranscript", () => {
  const mock = useAimock();
  let dir: string;
  let config: Config;
  let runtime: Runtime;
  let state: StateStore;
  let pipeline: Pipeline;
  let jobs: Map<string, Job>;
  let closed: boolean;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-transcript-"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-transcript-test" };
    config = await loadConfig({ cwd: dir, env });
    await mkdir(config.paths.workspace, { recursive: true });
    await writeFile(join(config.paths.workspace, "orders.csv"), `${ORDERS}\n`);
    runtime = await openRuntime(config, env);
    state = await StateStore.open(config.paths.state);
    jobs = new Map();
    pipeline = await openPipeline({
      config,
      env,
      state,
      runtime: () => runtime,
      job: (name) => jobs.get(name),
      concurrency: 2,
      paused: (name) => state.isPaused(name),
      spend: (local) => local,
      outbox: (send) => Outbox.open({ stateDir: config.paths.state, send, events: runtime.events }),
    });
    closed = false;
  });

  /** Stops what writes the files, as the daemon does on SIGTERM: the audit lines are in their file after it. */
  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    await pipeline.runner.shutdown(0);
    await pipeline.close();
    await runtime.close();
    await state.close();
  }

  afterEach(async () => {
    await close();
    await rm(dir, { recursive: true, force: true });
  });

  function job(name: string, prompt: string, extra: Partial<Job> = {}): Job {
    const defined: Job = {
      name,
      file: join(dir, "jobs", `${name}.yaml`),
      timezone: "UTC",
      prompt,
      ...jobDefaults(),
      tools: ["read_file"],
      ...extra,
    };
    jobs.set(name, defined);
    return defined;
  }

  const run = (name: string) => finalRecord(pipeline.runner, { job: name, reason: "manual", scheduledAt: new Date() });
  const sessionFile = (run: RunRecord) => join(config.paths.state, "sessions", sessionFileName(run.sessionId));

  /** The model reads orders.csv, then answers: two LLM calls and one tool call. */
  function ordersFixtures(prompt: string, answer: string) {
    mock.addFixture({
      match: { userMessage: prompt, hasToolResult: false },
      response: {
        toolCalls: [{ name: "read_file", arguments: '{"path":"orders.csv"}' }],
        usage: { prompt_tokens: 50, completion_tokens: 8, total_tokens: 58 },
      },
    });
    mock.addFixture({
      match: { userMessage: prompt, hasToolResult: true },
      response: { content: answer, usage: { prompt_tokens: 900, completion_tokens: 15, total_tokens: 915 } },
    });
  }

  /** What the model was sent as the result of the one tool call of this request. */
  function toolResultSent(request: number): string {
    const body = mock.getRequests()[request]!.body as { messages: Array<{ role: string; content: string }> };
    return body.messages.filter((m) => m.role === "tool").at(-1)!.content;
  }

  it("gives the prompt, each LLM call with its model and tokens, the tool call with its arguments and whole result, and the answer", async () => {
    job("orders", "Summarise the orders in orders.csv");
    ordersFixtures("Summarise the orders in orders.csv", "120 orders, the largest 862.75.");
    const record = await run("orders");
    expect(record).toMatchObject({ status: "ok", iterations: 2, toolCalls: 1 });
    await close();

    const transcript = await readTranscript(config.paths.state, record);
    const result = toolResultSent(1);
    // Whole: the audit log cuts a result after 2,000 characters; the session file keeps it all.
    expect(result.length).toBeGreaterThan(3_000);
    expect(result).toContain("1119,customer-119,862.75");
    expect(transcript).toEqual({
      prompt: "Summarise the orders in orders.csv",
      steps: [
        {
          kind: "llm",
          model: MODEL,
          usage: { inputTokens: 50, outputTokens: 8, cachedInputTokens: 0, cacheWriteTokens: 0 },
          // gpt-4o-mini's table prices: $0.15 in, $0.60 out per million tokens.
          cost: expect.closeTo((50 * 0.15 + 8 * 0.6) / 1e6, 12),
          duration_ms: expect.any(Number),
          finish_reason: "tool_calls",
        },
        {
          kind: "tool",
          call_id: expect.any(String),
          name: "read_file",
          arguments: { path: "orders.csv" },
          result,
          duration_ms: expect.any(Number),
          attempts: 1,
        },
        {
          kind: "llm",
          model: MODEL,
          usage: { inputTokens: 900, outputTokens: 15, cachedInputTokens: 0, cacheWriteTokens: 0 },
          // gpt-4o-mini's table prices: $0.15 in, $0.60 out per million tokens.
          cost: expect.closeTo((900 * 0.15 + 15 * 0.6) / 1e6, 12),
          duration_ms: expect.any(Number),
          finish_reason: "stop",
        },
        { kind: "text", text: "120 orders, the largest 862.75." },
      ],
    });
    expect(transcript).not.toHaveProperty("incomplete");
  });

  it("tells apart two runs of one shared session: each run's transcript holds its own prompt and steps only", async () => {
    ordersFixtures("Read the orders for the diary", "Noted the orders.");
    mock.addFixture({
      match: { userMessage: "What did you note last time?" },
      response: { content: "The orders: 120 of them.", usage: { prompt_tokens: 1200, completion_tokens: 9, total_tokens: 1209 } },
    });
    // The job file changed its prompt between the runs; its session goes on.
    job("diary", "Read the orders for the diary", { session: "shared" });
    const first = await run("diary");
    job("diary", "What did you note last time?", { session: "shared" });
    const second = await run("diary");
    expect(first.sessionId).toBe("cron:diary");
    expect(second.sessionId).toBe("cron:diary");
    // The second run's model saw the first run's messages: one history.
    expect((mock.getRequests()[2]!.body as { messages: unknown[] }).messages.length).toBeGreaterThan(3);
    await close();

    const firstTranscript = await readTranscript(config.paths.state, first);
    const secondTranscript = await readTranscript(config.paths.state, second);
    expect(firstTranscript.prompt).toBe("Read the orders for the diary");
    expect(firstTranscript.steps.map(kindAndWhat)).toEqual(["llm 50", "tool read_file", "llm 900", "text Noted the orders."]);
    expect(secondTranscript).toEqual({
      prompt: "What did you note last time?",
      steps: [
        {
          kind: "llm",
          model: MODEL,
          usage: { inputTokens: 1200, outputTokens: 9, cachedInputTokens: 0, cacheWriteTokens: 0 },
          // gpt-4o-mini's table prices: $0.15 in, $0.60 out per million tokens.
          cost: expect.closeTo((1200 * 0.15 + 9 * 0.6) / 1e6, 12),
          duration_ms: expect.any(Number),
          finish_reason: "stop",
        },
        { kind: "text", text: "The orders: 120 of them." },
      ],
    });

    // The session file says which messages are which run's.
    const markers = (await readFile(sessionFile(first), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { run?: string })
      .filter((line) => line.run !== undefined)
      .map((line) => line.run);
    expect(markers).toEqual([first.id, second.id]);
  });

  it("with the session file, the audit log and the tool history removed, still gives every step whole from the run's journal", async () => {
    job("orders", "Summarise the orders in orders.csv");
    ordersFixtures("Summarise the orders in orders.csv", "120 orders.");
    const record = await run("orders");
    await close();
    const whole = await readTranscript(config.paths.state, record);
    await rm(sessionFile(record));
    for (const file of await readdir(config.paths.logs)) await rm(join(config.paths.logs, file));
    await rm(join(config.paths.state, "tool-history"), { recursive: true, force: true });

    const transcript = await readTranscript(config.paths.state, record);
    expect(transcript).toEqual(whole);
    expect(transcript).not.toHaveProperty("incomplete");
    expect(transcript.prompt).toBe("Summarise the orders in orders.csv");
    expect(transcript.steps.map(kindAndWhat)).toEqual(["llm 50", "tool read_file", "llm 900", "text 120 orders."]);
    const tool = transcript.steps[1] as Extract<TranscriptStep, { kind: "tool" }>;
    // Whole, where the audit log cut it at 2,000 characters.
    expect(tool.result).toBe(toolResultSent(1));
  });

  it("with the run's journal removed, says it is incomplete and shows no steps", async () => {
    job("orders", "Summarise the orders in orders.csv");
    ordersFixtures("Summarise the orders in orders.csv", "120 orders.");
    const record = await run("orders");
    await close();
    await rm(join(config.paths.state, "journal", "orders", `${record.id}.jsonl`));

    expect(await readTranscript(config.paths.state, record)).toEqual({
      steps: [],
      incomplete: "no journal was found for this run: removed by retention (retention.sessions), or the run never started",
    });
  });

  it("a fire recorded without running has an empty transcript that is not incomplete", async () => {
    job("orders", "Summarise the orders in orders.csv");
    await state.pause("orders");
    const record = await finalRecord(pipeline.runner, { job: "orders", reason: "schedule", scheduledAt: new Date() });
    expect(record).toMatchObject({ status: "skipped", error: "paused" });
    await close();

    expect(await readTranscript(config.paths.state, record)).toEqual({ steps: [] });
    // Nor is a run in progress, whose messages are written when it ends.
    expect(await readTranscript(config.paths.state, { ...record, status: "running", iterations: 1 })).toEqual({ steps: [] });
  });
});

function kindAndWhat(step: TranscriptStep): string {
  if (step.kind === "subagent") return `subagent ${step.task}`;
  if (step.kind === "llm") return `llm ${step.usage.inputTokens}`;
  if (step.kind === "tool") return `tool ${step.name}`;
  if (step.kind === "repair") return `repair ${step.errors.join("; ")}`;
  if (step.kind === "verify") return `verify ${step.check}`;
  if (step.kind === "approval") return `approval ${step.event}`;
  return `text ${step.text}`;
}
