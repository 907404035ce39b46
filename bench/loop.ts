/**
 * (a) The loop's own cost per iteration, with a provider that answers instantly, beside a bare
 *     loop doing the same provider and tool calls with none of the agent's bookkeeping.
 * (b) Time to the first answer chunk through AgentLoop.processMessage beside the bare `openai`
 *     SDK reading the same aimock stream, interleaved run by run so machine noise hits both.
 * (c) A whole exchange of five tool calls and an answer (bench/exchange.ts): the bare SDK, AgentLoop
 *     alone, the loop as the daemon wires it, the Vercel AI SDK and OpenAI Agents JS, interleaved.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { z } from "zod";
import { ContextBuilder } from "../src/agent/context.js";
import { AgentLoop } from "../src/agent/loop.js";
import { MemoryStore } from "../src/memory/store.js";
import { OpenAIProvider } from "../src/providers/openai.js";
import { toWireMessages } from "../src/providers/openai-messages.js";
import { withRetry } from "../src/providers/retry.js";
import type { ChatMessage, LLMProvider, StreamEvent } from "../src/providers/types.js";
import { SkillsLoader } from "../src/skills/loader.js";
import { defineTool, ToolRegistry } from "../src/tools/registry.js";
import { benchExchange, type ExchangeBenchResult } from "./exchange.js";
import { median } from "./stats.js";

export interface LoopBenchResult {
  iterationMs: number;
  bareIterationMs: number;
  overheadMs: number;
  firstChunkLoopMs: number;
  firstChunkSdkMs: number;
  firstChunkRatio: number;
  exchange: ExchangeBenchResult;
}

/** Answers every turn with one tool call, at once: all time measured is the consumer's. */
const instantProvider: LLMProvider = {
  name: "instant",
  async *chatStream(): AsyncIterable<StreamEvent> {
    yield { type: "tool_call", call: { id: "call_1", name: "noop", arguments: {}, rawArguments: "{}" } };
    yield { type: "usage", usage: { inputTokens: 10, outputTokens: 2, cachedInputTokens: 0, cacheWriteTokens: 0 } };
    yield { type: "finish", reason: "tool_calls", raw: "tool_calls" };
  },
};

const noop = defineTool({ name: "noop", description: "Does nothing.", parameters: z.object({}), execute: async () => "ok" });

async function contextFor(workspace: string) {
  const memory = new MemoryStore(workspace);
  return new ContextBuilder({
    workspace,
    memory,
    skills: new SkillsLoader(workspace),
    persona: { name: "countd", personality: "gentle", locale: "en" },
    timezone: "UTC",
  });
}

async function iterationCost(workspace: string, iterations: number, rounds: number) {
  const tools = new ToolRegistry().register(noop);
  const loop = new AgentLoop({
    provider: instantProvider,
    workspace,
    tools,
    contextBuilder: await contextFor(workspace),
    model: "instant",
    maxIterations: iterations,
    // The same call on every iteration is what this measures, which the runaway breaker would stop at its third.
    breaker: false,
  });
  const loopMs: number[] = [];
  const bareMs: number[] = [];
  for (let round = 0; round < rounds; round++) {
    let t0 = performance.now();
    await loop.processDirect("go", "bench");
    loopMs.push((performance.now() - t0) / iterations);

    t0 = performance.now();
    const messages: ChatMessage[] = [{ role: "user", content: "go" }];
    for (let i = 0; i < iterations; i++) {
      for await (const event of instantProvider.chatStream(messages, tools.getDefinitions(), {
        model: "instant",
        temperature: 0,
        maxTokens: 1,
      })) {
        if (event.type === "tool_call") {
          const content = await noop.execute({}, { sessionId: "bench", workspace, signal: new AbortController().signal });
          messages.push({ role: "assistant", content: null, toolCalls: [event.call] });
          messages.push({ role: "tool", toolCallId: event.call.id, name: "noop", content });
        }
      }
    }
    bareMs.push((performance.now() - t0) / iterations);
  }
  return { iterationMs: median(loopMs), bareIterationMs: median(bareMs) };
}

async function firstChunk(workspace: string, runs: number) {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  mock.onMessage("status", { content: "All jobs ran on time and every delivery was acknowledged." });
  await mock.start();
  try {
    const sdk = new OpenAI({ baseURL: `${mock.url}/v1`, apiKey: "bench", maxRetries: 0 });
    const contextBuilder = await contextFor(workspace);
    const loop = new AgentLoop({
      provider: withRetry(new OpenAIProvider({ name: "openai", baseURL: `${mock.url}/v1`, apiKey: "bench" })),
      workspace,
      tools: new ToolRegistry(),
      contextBuilder,
      model: "gpt-4o-mini",
    });
    // The bare SDK sends the very request the loop sends, so the ratio is the loop's own cost,
    // not a difference in payload.
    const messages = toWireMessages(await contextBuilder.buildMessages([], "status"));
    const loopMs: number[] = [];
    const sdkMs: number[] = [];
    const viaSdk = async () => {
      const t0 = performance.now();
      const stream = await sdk.chat.completions.create(
        {
          model: "gpt-4o-mini",
          messages,
          temperature: 0.7,
          max_tokens: 4096,
          stream: true,
          stream_options: { include_usage: true },
        },
        { signal: new AbortController().signal },
      );
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) {
          sdkMs.push(performance.now() - t0);
          break;
        }
      }
    };
    const viaLoop = async (i: number) => {
      const t0 = performance.now();
      for await (const _chunk of loop.processMessage("status", `bench-${i}`)) {
        loopMs.push(performance.now() - t0);
        break;
      }
    };
    // Which goes first alternates at random, so neither always runs on a warmer connection.
    for (let i = 0; i < runs; i++) {
      if (Math.random() < 0.5) {
        await viaSdk();
        await viaLoop(i);
      } else {
        await viaLoop(i);
        await viaSdk();
      }
    }
    const warm = Math.floor(runs / 10);
    return { firstChunkLoopMs: median(loopMs.slice(warm)), firstChunkSdkMs: median(sdkMs.slice(warm)) };
  } finally {
    await mock.stop();
  }
}

export async function benchLoop(): Promise<LoopBenchResult> {
  const workspace = await mkdtemp(join(tmpdir(), "countd-bench-"));
  try {
    const cost = await iterationCost(workspace, 200, 30);
    const first = await firstChunk(workspace, 2000);
    return {
      ...cost,
      overheadMs: cost.iterationMs - cost.bareIterationMs,
      ...first,
      firstChunkRatio: first.firstChunkLoopMs / first.firstChunkSdkMs,
      exchange: await benchExchange(),
    };
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
}
