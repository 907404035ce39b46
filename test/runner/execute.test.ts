import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CancelToken } from "../../src/agent/cancel.js";
import { runAgent } from "../../src/runner/execute.js";
import { defineTool, ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";

type WireRequest = { messages: Array<{ role: string }> };
const toolResults = (req: unknown) => (req as WireRequest).messages.filter((m) => m.role === "tool").length;

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  parameters: z.object({ word: z.string() }),
  async execute(args) {
    return `${args.word}: found`;
  },
});

describe("runAgent", () => {
  const mock = useAimock();

  /** Answers after `calls` lookups; every LLM call reports 10 input and 4 output tokens. */
  function scripted(prompt: string, calls: number) {
    mock.addFixture({
      match: { userMessage: prompt },
      response: (req) =>
        toolResults(req) < calls
          ? {
              toolCalls: [{ name: "lookup", arguments: JSON.stringify({ word: `w${toolResults(req)}` }) }],
              usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
            }
          : { content: `${prompt}: all done`, usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 } },
    });
  }

  it("returns the answer with the run's iterations, tool calls and token usage", async () => {
    scripted("summarise the inbox", 2);
    const { loop } = await makeAgent("openai", mock, new ToolRegistry().register(lookup));
    const outcome = await runAgent(loop, "summarise the inbox", "cron:report:r1", new CancelToken());
    expect(outcome).toEqual({
      answer: "summarise the inbox: all done",
      status: "ok",
      iterations: 3,
      toolCalls: 2,
      usage: { inputTokens: 30, outputTokens: 12, cachedInputTokens: 0, cacheWriteTokens: 0 },
      calls: [
        { name: "lookup", arguments: { word: "w0" }, isError: false, result: "w0: found" },
        { name: "lookup", arguments: { word: "w1" }, isError: false, result: "w1: found" },
      ],
    });
  });

  it("counts each of two runs at once on its own session", async () => {
    scripted("busy job", 3);
    scripted("quick job", 0);
    const { loop } = await makeAgent("openai", mock, new ToolRegistry().register(lookup));
    const [busy, quick] = await Promise.all([
      runAgent(loop, "busy job", "cron:busy:r1", new CancelToken()),
      runAgent(loop, "quick job", "cron:quick:r1", new CancelToken()),
    ]);
    expect(busy).toMatchObject({ status: "ok", iterations: 4, toolCalls: 3, usage: { inputTokens: 40 } });
    expect(quick).toMatchObject({ status: "ok", iterations: 1, toolCalls: 0, usage: { inputTokens: 10 } });
  });

  it("reports an LLM failure as an error with the provider's message", async () => {
    mock.onMessage("doomed", { error: { message: "context too long", type: "invalid_request_error" }, status: 400 });
    const { loop } = await makeAgent("openai", mock, new ToolRegistry());
    const outcome = await runAgent(loop, "doomed", "cron:doomed:r1", new CancelToken());
    expect(outcome.status).toBe("error");
    expect(outcome.error).toContain("context too long");
    expect(outcome.iterations).toBe(1);
    expect(outcome.answer).toBe("");
  });

  it("reports a cancel during a tool as cancelled, and the tool saw it", async () => {
    let toolSawAbort = false;
    const cancel = new CancelToken();
    const waits = defineTool({
      name: "wait_for_data",
      description: "Waits until data arrives.",
      parameters: z.object({}),
      execute: (_args, ctx) =>
        new Promise<string>((resolve) => {
          ctx.signal.addEventListener("abort", () => {
            toolSawAbort = true;
            resolve("aborted");
          });
          cancel.cancel("timeout");
        }),
    });
    mock.onMessage("wait for it", { toolCalls: [{ name: "wait_for_data", arguments: "{}" }] });
    const { loop } = await makeAgent("openai", mock, new ToolRegistry().register(waits));
    const outcome = await runAgent(loop, "wait for it", "cron:waiter:r1", cancel);
    expect(outcome).toMatchObject({ status: "cancelled", iterations: 1, toolCalls: 1 });
    expect(toolSawAbort).toBe(true);
    expect(mock.getRequests()).toHaveLength(1);
  });

  it("ends a run that hit the tool-call limit as ok, its answer ending with the notice", async () => {
    mock.onMessage("loop forever", { toolCalls: [{ name: "lookup", arguments: JSON.stringify({ word: "again" }) }] });
    const { loop } = await makeAgent("openai", mock, new ToolRegistry().register(lookup), { maxIterations: 2 });
    const outcome = await runAgent(loop, "loop forever", "cron:looper:r1", new CancelToken());
    expect(outcome.status).toBe("ok");
    expect(outcome.toolCalls).toBe(2);
    expect(outcome.answer).toContain("[Reached the maximum number of tool calls: 2]");
  });
});
