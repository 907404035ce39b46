import { describe, expect, it } from "vitest";
import { z } from "zod";
import { SubagentManager } from "../../src/agent/subagents.js";
import { spawnTool } from "../../src/agent/spawn.js";
import { defineTool, ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";

type WireRequest = { messages: Array<{ role: string; content: unknown }>; tools?: Array<{ function: { name: string } }> };
const lastText = (req: WireRequest) => {
  const content = req.messages.at(-1)?.content;
  return typeof content === "string" ? content : JSON.stringify(content);
};
const isSubagent = (req: WireRequest) => JSON.stringify(req.messages).includes("Channel: subagent");

/** Two runs each waiting at the gate see each other inside it only if both may run at once. */
function gatedTool() {
  let inside = 0;
  let most = 0;
  let open: () => void = () => {};
  const bothInside = new Promise<void>((resolve) => (open = resolve));
  const tool = defineTool({
    name: "work",
    description: "Does a piece of work.",
    parameters: z.object({}),
    async execute() {
      inside++;
      most = Math.max(most, inside);
      if (inside === 2) open();
      await Promise.race([bothInside, new Promise((resolve) => setTimeout(resolve, 300))]);
      inside--;
      return "worked";
    },
  });
  return { tool, most: () => most };
}

describe("spawn", () => {
  const mock = useAimock();

  async function setup(opts: { maxConcurrent: number; timeoutMs: number; subTools: ToolRegistry }) {
    const sub = await makeAgent("openai", mock, opts.subTools, { maxIterations: 15 });
    const subagents = new SubagentManager({ maxConcurrent: opts.maxConcurrent, timeoutMs: opts.timeoutMs });
    const parent = await makeAgent("openai", mock, new ToolRegistry().register(spawnTool(subagents, sub.loop)));
    return { parent, sub };
  }

  it("runs the task in a subagent session with the subagent's tools and returns its answer to the parent", async () => {
    mock.addFixture({
      match: { predicate: (req) => isSubagent(req as WireRequest) },
      response: { content: "The inbox holds 3 CSV files." },
    });
    mock.addFixture({
      match: { userMessage: "check the inbox", hasToolResult: false },
      response: { toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task: "Count the CSV files in inbox/." }) }] },
    });
    mock.addFixture({
      match: { userMessage: "check the inbox", hasToolResult: true },
      response: (req) => ({ content: `Parent heard: ${lastText(req as WireRequest)}` }),
    });
    const { tool } = gatedTool();
    const { parent, sub } = await setup({ maxConcurrent: 2, timeoutMs: 10_000, subTools: new ToolRegistry().register(tool) });

    const answer = (await parent.loop.processDirect("check the inbox", "cli")).answer;
    expect(answer).toMatch(/^Parent heard: \[subagent [0-9a-f]{8}\]\nThe inbox holds 3 CSV files\.$/);
    const subRequest = mock.getRequests().find((r) => isSubagent(r.body as WireRequest))!.body as WireRequest;
    expect(subRequest.messages.at(-1)).toMatchObject({ role: "user", content: "Count the CSV files in inbox/." });
    expect(subRequest.tools?.map((t) => t.function.name)).toEqual(["work"]);
    const id = answer.match(/\[subagent ([0-9a-f]{8})\]/)![1];
    expect((await sub.sessions.load(`subagent:${id}`)).map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  it("stops a subagent that outlives its timeout and tells the parent", async () => {
    mock.addFixture({
      match: { predicate: (req) => isSubagent(req as WireRequest) },
      response: { content: "a very slow answer that takes far too long to arrive" },
      latency: 200,
    });
    mock.addFixture({
      match: { userMessage: "slow task", hasToolResult: false },
      response: { toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task: "Take your time." }) }] },
    });
    mock.addFixture({
      match: { userMessage: "slow task", hasToolResult: true },
      response: (req) => ({ content: `Parent heard: ${lastText(req as WireRequest)}` }),
    });
    const { parent } = await setup({ maxConcurrent: 1, timeoutMs: 300, subTools: new ToolRegistry() });
    const finished: Array<{ name: string; attempts: number }> = [];
    parent.loop.events.on("tool.finished", (e) => finished.push(e));
    expect((await parent.loop.processDirect("slow task", "cli")).answer).toMatch(
      /^Parent heard: Error: subagent [0-9a-f]{8} gave no answer within 300 ms and was stopped$/,
    );
    // The subagent may have acted, and another would take as long: it is not started again.
    expect(finished).toEqual([expect.objectContaining({ name: "spawn", attempts: 1 })]);
  });

  it.each([
    [1, 1],
    [2, 2],
  ])("runs at most %i subagent(s) at once", async (maxConcurrent, expected) => {
    mock.addFixture({
      match: { predicate: (req) => isSubagent(req as WireRequest) && (req as WireRequest).messages.at(-1)?.role === "user" },
      response: { toolCalls: [{ name: "work", arguments: "{}" }] },
    });
    mock.addFixture({
      match: { predicate: (req) => isSubagent(req as WireRequest) },
      response: { content: "done" },
    });
    mock.addFixture({
      match: { predicate: (req) => !isSubagent(req as WireRequest) && (req as WireRequest).messages.at(-1)?.role === "user" },
      response: { toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task: "Do the work." }) }] },
    });
    mock.addFixture({ match: { predicate: () => true }, response: { content: "parent done" } });
    const { tool, most } = gatedTool();
    const { parent } = await setup({ maxConcurrent, timeoutMs: 10_000, subTools: new ToolRegistry().register(tool) });
    await Promise.all([parent.loop.processDirect("job one", "a"), parent.loop.processDirect("job two", "b")]);
    expect(most()).toBe(expected);
  });
});
