/**
 * One agent exchange, the same for every contender: the model calls `lookup` five times, one call
 * a turn, then answers; six streamed chat-completions requests to one aimock server on loopback.
 *
 * - sdk: the bare `openai` SDK doing the six requests and five tool calls by hand, on the very
 *   messages countd's loop sends (the baseline every other figure is a ratio to).
 * - loop: countd's AgentLoop alone, with no sessions, tool history or audit log.
 * - daemon: the same exchange as the daemon runs a cron job: openRuntime on a countd.yaml in a
 *   temporary folder (audit log, sessions and the run journal on, in its state and logs folders),
 *   each run through jobExecutor with a fresh isolated session, recorded in its run journal.
 * - vercel: the Vercel AI SDK's streamText with the tool and a stop after six steps.
 * - agents: OpenAI Agents JS's run() on a chat-completions model, streamed, at most six turns.
 *
 * Each round runs every contender for a batch of exchanges, in a fresh random order, so machine
 * noise and the server's own cost fall on all of them alike; a batch's mean keeps what a
 * contender pays now and then (a flush, a GC), the median over rounds drops the noisy rounds.
 * Ratios are taken within each round, then their median, so a machine that slows down for a
 * while (other processes on its two cores) moves the contenders of a round together.
 */
import { Budgets } from "../src/cost/budget.js";
import { RunJournals } from "../src/runner/journaled-run.js";
import { SpendLedger } from "../src/store/spend-ledger.js";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createOpenAI } from "@ai-sdk/openai";
import { LLMock, type ChatCompletionRequest } from "@copilotkit/aimock";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool as agentsTool } from "@openai/agents";
import { stepCountIs, streamText, tool as vercelTool } from "ai";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { z } from "zod";
import { CancelToken } from "../src/agent/cancel.js";
import { ContextBuilder } from "../src/agent/context.js";
import { AgentLoop } from "../src/agent/loop.js";
import { loadConfig } from "../src/config/load.js";
import { jobDefaults } from "../src/jobs/defaults.js";
import type { Job } from "../src/jobs/types.js";
import { MemoryStore } from "../src/memory/store.js";
import { OpenAIProvider } from "../src/providers/openai.js";
import { toWireMessages } from "../src/providers/openai-messages.js";
import { withRetry } from "../src/providers/retry.js";
import { jobExecutor } from "../src/runner/execute.js";
import { runSessionId } from "../src/runner/session-ids.js";
import { openRuntime } from "../src/runtime.js";
import { SkillsLoader } from "../src/skills/loader.js";
import { defineTool, ToolRegistry } from "../src/tools/registry.js";
import { median } from "./stats.js";

export const CONTENDERS = ["sdk", "loop", "daemon", "vercel", "agents"] as const;
export type Contender = (typeof CONTENDERS)[number];

export interface ExchangeBenchResult {
  /** Exchanges measured per contender (warm-up excluded). */
  exchanges: number;
  /** Median over rounds of each round's mean time per exchange. */
  ms: Record<Contender, number>;
  /** Median over rounds of the round's time per exchange over the bare SDK's. */
  ratio: Record<Contender, number>;
}

const MODEL = "gpt-4o-mini";
const TOOL_CALLS = 5;
const PROMPT = "Check the five services one by one with lookup, then say how they are.";
const ANSWER = "All five services are green; disk usage is at 61 %, up 2 points since yesterday.";
const DESCRIPTION = "Looks up the status of one service by its step number.";

const lookup = (step: number) => `service ${step}: green, p99 latency 42 ms, disk 61 %`;
const parameters = z.object({ step: z.number().int() });

/** The server's script: the n-th turn of an exchange (n tool results so far) calls lookup(n + 1), the sixth answers. */
function reply(req: ChatCompletionRequest) {
  const done = req.messages.filter((m) => m.role === "tool").length;
  if (done >= TOOL_CALLS) return { content: ANSWER };
  return { toolCalls: [{ id: `call_${done + 1}`, name: "lookup", arguments: JSON.stringify({ step: done + 1 }) }] };
}

type Exchange = () => Promise<string>;

/** The bare SDK: stream each turn, gather the tool-call deltas, run the tool, send the result back. */
function bareSdk(client: OpenAI, start: ChatCompletionMessageParam[], tools: ChatCompletionTool[]): Exchange {
  return async () => {
    const messages = [...start];
    for (;;) {
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages,
        tools,
        temperature: 0.7,
        max_tokens: 4096,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = "";
      const calls: Array<{ id: string; name: string; arguments: string }> = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        if (delta?.content) text += delta.content;
        for (const part of delta?.tool_calls ?? []) {
          const call = (calls[part.index] ??= { id: "", name: "", arguments: "" });
          if (part.id) call.id = part.id;
          if (part.function?.name) call.name += part.function.name;
          if (part.function?.arguments) call.arguments += part.function.arguments;
        }
      }
      if (calls.length === 0) return text;
      messages.push({
        role: "assistant",
        content: text || null,
        tool_calls: calls.map((call) => ({ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } })),
      });
      for (const call of calls) {
        const { step } = JSON.parse(call.arguments) as { step: number };
        messages.push({ role: "tool", tool_call_id: call.id, content: lookup(step) });
      }
    }
  };
}

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

async function filesUnder(dir: string): Promise<number> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile()).length;
}

/** The five contenders on one server, each checked once to do the exchange exactly; close() removes every trace. */
export async function openContenders(): Promise<{ exchanges: Record<Contender, Exchange>; close(): Promise<void> }> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  mock.on({}, reply);
  await mock.start();
  const dir = await mkdtemp(join(tmpdir(), "countd-bench-exchange-"));
  // The exec tool's sandbox is looked for at start-up; this run offers no exec, so none is needed.
  await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
  const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-bench" };
  const config = await loadConfig({ cwd: dir, env });
  const runtime = await openRuntime(config, env);
  const close = async () => {
    await runtime.close();
    await mock.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const { workspace } = config.paths;
    const lookupTool = defineTool({ name: "lookup", description: DESCRIPTION, parameters, execute: async ({ step }) => lookup(step) });
    const tools = new ToolRegistry().register(lookupTool);
    // The runtime's own context builder is private; this one is made from the same config, so every contender sends the same prompt.
    const contextBuilder = new ContextBuilder({
      workspace,
      memory: new MemoryStore(workspace),
      skills: new SkillsLoader(workspace, env),
      persona: config.persona,
      timezone: config.timezone,
    });
    const start = await contextBuilder.buildMessages([], PROMPT, { channel: "cron" });
    const system = start
      .filter((m) => m.role === "system")
      .map((m) => m.content)
      .join("\n\n");

    const loop = new AgentLoop({
      provider: withRetry(new OpenAIProvider({ name: "openai", baseURL: `${mock.url}/v1`, apiKey: "sk-bench" })),
      workspace,
      tools,
      contextBuilder,
      model: MODEL,
    });

    const job: Job = {
      ...jobDefaults(),
      name: "bench",
      file: join(config.paths.jobs, "bench.yaml"),
      prompt: PROMPT,
      timezone: config.timezone,
      tools: [],
    };
    const budgets = new Budgets({ ledger: await SpendLedger.open(config.paths.state), daemon: () => config.budget });
    const journals = new RunJournals({ state: () => config.paths.state, redactor: () => runtime.redactor });
    const execute = journals.executor(jobExecutor(() => runtime, budgets));
    let runs = 0;
    const daemon: Exchange = async () => {
      const id = `run-${++runs}`;
      const sessionId = runSessionId(job.name, job.session, id);
      const startedAt = new Date().toISOString();
      const outcome = await execute(job, {
        id,
        sessionId,
        request: { job: job.name, reason: "schedule", scheduledAt: new Date(), extraTools: [lookupTool] },
        clock: { at: new Date(), timeZone: job.timezone },
        cancel: new CancelToken(),
      });
      if (outcome.status !== "ok" || outcome.toolCalls !== TOOL_CALLS)
        throw new Error(`daemon run ${outcome.status}: ${outcome.error ?? `${outcome.toolCalls} tool calls`}`);
      const { iterations, toolCalls, usage, cost } = outcome;
      const record = { id, job: job.name, reason: "schedule" as const, scheduledAt: startedAt, startedAt, sessionId };
      await journals.end({ ...record, status: "ok", iterations, toolCalls, usage, ...(cost !== undefined ? { cost } : {}) }, [], outcome);
      return outcome.answer;
    };

    const openai = createOpenAI({ baseURL: `${mock.url}/v1`, apiKey: "sk-bench" });
    const vercelTools = {
      lookup: vercelTool({ description: DESCRIPTION, inputSchema: parameters, execute: async ({ step }) => lookup(step) }),
    };
    const vercel: Exchange = async () => {
      const result = streamText({
        model: openai.chat(MODEL),
        system,
        prompt: PROMPT,
        tools: vercelTools,
        stopWhen: stepCountIs(TOOL_CALLS + 1),
      });
      for await (const _text of result.textStream);
      return result.text;
    };

    // Traces would go to OpenAI's servers; nothing here may leave loopback.
    setTracingDisabled(true);
    const agent = new Agent({
      name: "countd-bench",
      instructions: system,
      model: new OpenAIChatCompletionsModel(new OpenAI({ baseURL: `${mock.url}/v1`, apiKey: "sk-bench", maxRetries: 0 }), MODEL),
      tools: [agentsTool({ name: "lookup", description: DESCRIPTION, parameters, execute: async ({ step }) => lookup(step) })],
    });
    const agents: Exchange = async () => {
      const result = await run(agent, PROMPT, { stream: true, maxTurns: TOOL_CALLS + 1 });
      for await (const _event of result);
      await result.completed;
      return String(result.finalOutput);
    };

    const sdkClient = new OpenAI({ baseURL: `${mock.url}/v1`, apiKey: "sk-bench", maxRetries: 0 });
    const exchanges: Record<Contender, Exchange> = {
      sdk: bareSdk(sdkClient, toWireMessages(start) as ChatCompletionMessageParam[], tools.getDefinitions() as ChatCompletionTool[]),
      loop: async () => (await loop.processDirect(PROMPT, "bench", { channel: "cron" })).answer,
      daemon,
      vercel,
      agents,
    };

    // A contender that took a shortcut (fewer requests, no tool run, another API) would measure something else.
    for (const name of CONTENDERS) {
      mock.clearRequests();
      const answer = await exchanges[name]();
      const requests = mock.getRequests();
      const results = (requests.at(-1)?.body as ChatCompletionRequest | undefined)?.messages.filter((m) => m.role === "tool") ?? [];
      const ranTools = results.every((m, i) => m.content === lookup(i + 1));
      if (answer !== ANSWER || requests.length !== TOOL_CALLS + 1 || results.length !== TOOL_CALLS || !ranTools) {
        throw new Error(
          `bench/exchange: ${name} did not do the exchange: ${requests.length} requests, ${results.length} tool results, answer ${JSON.stringify(answer)}`,
        );
      }
    }
    const wired = { state: await filesUnder(config.paths.state), logs: await filesUnder(config.paths.logs) };
    if (wired.state === 0 || wired.logs === 0)
      throw new Error(`bench/exchange: the daemon's run wrote nothing (state ${wired.state} files, logs ${wired.logs})`);

    return { exchanges, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export async function benchExchange(rounds = 60, batch = 5, warmupRounds = 6): Promise<ExchangeBenchResult> {
  const { exchanges, close } = await openContenders();
  try {
    const perRound: Record<Contender, number[]> = { sdk: [], loop: [], daemon: [], vercel: [], agents: [] };
    for (let round = 0; round < warmupRounds + rounds; round++) {
      for (const name of shuffled(CONTENDERS)) {
        const t0 = performance.now();
        for (let i = 0; i < batch; i++) await exchanges[name]();
        if (round >= warmupRounds) perRound[name].push((performance.now() - t0) / batch);
      }
    }
    const each = (figure: (name: Contender) => number) =>
      Object.fromEntries(CONTENDERS.map((name) => [name, figure(name)])) as Record<Contender, number>;
    return {
      exchanges: rounds * batch,
      ms: each((name) => median(perRound[name])),
      ratio: each((name) => median(perRound[name].map((ms, round) => ms / perRound.sdk[round]!))),
    };
  } finally {
    await close();
  }
}
