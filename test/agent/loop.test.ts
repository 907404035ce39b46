import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { CancelToken } from "../../src/agent/cancel.js";
import { LLMError } from "../../src/providers/errors.js";
import type { ChatMessage } from "../../src/providers/types.js";
import { ToolRefusal } from "../../src/tools/paths.js";
import { defineTool, ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent, TEST_KEYS, WIRE_FORMATS } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";
import { startAnthropicSSE, type AnthropicSSEServer } from "../support/anthropic-sse.js";
import { AuditLog } from "../../src/audit/log.js";

const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");

type WireRequest = { messages: Array<{ role: string; content: unknown; tool_call_id?: string; tool_calls?: unknown[] }> };

const toolMessages = (req: WireRequest) => req.messages.filter((m) => m.role === "tool");
const lastMessage = (req: WireRequest) => req.messages.at(-1)!;
const textOf = (content: unknown): string =>
  typeof content === "string" ? content : Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";

/** Every tool call in a history has exactly one result: providers reject anything else with HTTP 400. */
function expectEveryCallAnswered(history: ChatMessage[]) {
  const callIds = history.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : []));
  const resultIds = history.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : []));
  expect(resultIds.sort()).toEqual(callIds.sort());
}

function echoTool() {
  const calls: unknown[] = [];
  const tool = defineTool({
    name: "echo",
    description: "Echoes the text back.",
    parameters: z.object({ text: z.string() }),
    async execute(args) {
      calls.push(args);
      return `echo: ${args.text}`;
    },
  });
  return { tool, calls };
}

describe.each(WIRE_FORMATS)("AgentLoop over the %s wire format", (format) => {
  const mock = useAimock({ chunkSize: 4 });

  it("streams a plain answer in several chunks and saves the exchange in the session", async () => {
    mock.onMessage("hello", { content: "Hello! The daemon is running and all jobs are on schedule." });
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry());
    const chunks: string[] = [];
    for await (const chunk of loop.processMessage("hello there", "cli")) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join("")).toBe("Hello! The daemon is running and all jobs are on schedule.");
    const history = await sessions.load("cli");
    expect(history.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(history[1]).toMatchObject({ content: "Hello! The daemon is running and all jobs are on schedule." });
  });

  it("runs several tool-using iterations, feeding each result back", async () => {
    mock.addFixture({
      match: { userMessage: "count to three" },
      response: (req) => {
        const done = toolMessages(req as WireRequest).length;
        return done < 3
          ? { toolCalls: [{ name: "echo", arguments: JSON.stringify({ text: `step ${done + 1}` }) }] }
          : { content: `Counted: ${textOf(lastMessage(req as WireRequest).content)}` };
      },
    });
    const { tool, calls } = echoTool();
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(tool));
    const iterations: number[] = [];
    loop.events.on("iteration", (e) => iterations.push(e.iteration));
    const answer = (await loop.processDirect("count to three", "s1")).answer;
    expect(answer).toBe("Counted: echo: step 3");
    expect(calls).toEqual([{ text: "step 1" }, { text: "step 2" }, { text: "step 3" }]);
    expect(iterations).toEqual([1, 2, 3, 4]);
    const history = await sessions.load("s1");
    expectEveryCallAnswered(history);
    expect(history.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["echo: step 1", "echo: step 2", "echo: step 3"]);
  });

  it("executes two tool calls of one turn and answers both ids", async () => {
    mock.addFixture({
      match: { userMessage: "two at once", hasToolResult: false },
      response: {
        toolCalls: [
          { id: "call_a", name: "echo", arguments: JSON.stringify({ text: "first" }) },
          { id: "call_b", name: "echo", arguments: JSON.stringify({ text: "second" }) },
        ],
      },
    });
    mock.addFixture({ match: { userMessage: "two at once", hasToolResult: true }, response: { content: "both done" } });
    const { tool, calls } = echoTool();
    const { loop } = await makeAgent(format, mock, new ToolRegistry().register(tool));
    expect((await loop.processDirect("two at once", "s2")).answer).toBe("both done");
    expect(calls).toHaveLength(2);
    const second = mock.getRequests().at(-1)!.body as WireRequest;
    expect(toolMessages(second).map((m) => [m.tool_call_id, textOf(m.content)])).toEqual([
      ["call_a", "echo: first"],
      ["call_b", "echo: second"],
    ]);
  });

  it("retries a failing tool: two failures then success take three attempts", async () => {
    mock.addFixture({
      match: { userMessage: "flaky tool", hasToolResult: false },
      response: { toolCalls: [{ name: "flaky", arguments: "{}" }] },
    });
    mock.addFixture({
      match: { userMessage: "flaky tool", hasToolResult: true },
      response: (req) => ({ content: `tool said ${textOf(lastMessage(req as WireRequest).content)}` }),
    });
    let runs = 0;
    const flaky = defineTool({
      name: "flaky",
      description: "Fails twice, then works.",
      parameters: z.object({}),
      async execute() {
        runs++;
        if (runs < 3) throw new Error(`disk busy (${runs})`);
        return "ok on attempt 3";
      },
    });
    const { loop } = await makeAgent(format, mock, new ToolRegistry().register(flaky), { maxRetries: 3 });
    const finished: Array<{ attempts: number; error?: string }> = [];
    loop.events.on("tool.finished", (e) => finished.push(e));
    expect((await loop.processDirect("flaky tool", "s3")).answer).toBe("tool said ok on attempt 3");
    expect(runs).toBe(3);
    expect(finished).toEqual([expect.objectContaining({ attempts: 3, result: "ok on attempt 3" })]);
    expect(finished[0]!.error).toBeUndefined();
  });

  it("reports the files a tool wrote on the event bus, with the session", async () => {
    mock.addFixture({
      match: { userMessage: "save it", hasToolResult: false },
      response: { toolCalls: [{ name: "saver", arguments: "{}" }] },
    });
    mock.addFixture({ match: { userMessage: "save it", hasToolResult: true }, response: { content: "saved" } });
    const saver = defineTool({
      name: "saver",
      description: "Saves.",
      parameters: z.object({}),
      async execute(_args, ctx) {
        ctx.wrote?.("/srv/workspace/out.txt");
        return "ok";
      },
    });
    const { loop } = await makeAgent(format, mock, new ToolRegistry().register(saver));
    const written: Array<{ sessionId: string; path: string }> = [];
    loop.events.on("file.written", (e) => written.push(e));
    await loop.processDirect("save it", "cron:report:1");
    expect(written).toEqual([{ sessionId: "cron:report:1", path: "/srv/workspace/out.txt" }]);
  });

  it("does not retry a tool's safety refusal", async () => {
    mock.addFixture({
      match: { userMessage: "read the passwords", hasToolResult: false },
      response: { toolCalls: [{ name: "guarded", arguments: "{}" }] },
    });
    mock.addFixture({
      match: { userMessage: "read the passwords", hasToolResult: true },
      response: (req) => ({ content: `told: ${textOf(lastMessage(req as WireRequest).content)}` }),
    });
    let runs = 0;
    const guarded = defineTool({
      name: "guarded",
      description: "Refuses.",
      parameters: z.object({}),
      async execute() {
        runs++;
        throw new ToolRefusal('refused: "/etc/shadow" is outside the workspace');
      },
    });
    const { loop } = await makeAgent(format, mock, new ToolRegistry().register(guarded), { maxRetries: 3 });
    expect((await loop.processDirect("read the passwords", "s19")).answer).toBe(
      'told: Error: refused: "/etc/shadow" is outside the workspace',
    );
    expect(runs).toBe(1);
  });

  it("gives the LLM the error text when a tool fails on every attempt", async () => {
    mock.addFixture({
      match: { userMessage: "broken tool", hasToolResult: false },
      response: { toolCalls: [{ name: "broken", arguments: "{}" }] },
    });
    mock.addFixture({
      match: { userMessage: "broken tool", hasToolResult: true },
      response: (req) => ({ content: `reported: ${textOf(lastMessage(req as WireRequest).content)}` }),
    });
    let runs = 0;
    const broken = defineTool({
      name: "broken",
      description: "Always fails.",
      parameters: z.object({}),
      async execute() {
        runs++;
        throw new Error("permission denied: /srv/reports");
      },
    });
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(broken), { maxRetries: 2 });
    expect((await loop.processDirect("broken tool", "s4")).answer).toBe("reported: Error: permission denied: /srv/reports");
    expect(runs).toBe(2);
    const result = (await sessions.load("s4")).find((m) => m.role === "tool");
    expect(result).toMatchObject({ isError: true, content: "Error: permission denied: /srv/reports" });
  });

  // aimock re-serialises Anthropic tool input (invalid JSON becomes {}); that format is covered
  // against the scripted Anthropic server at the end of this file.
  it.runIf(format === "openai")("answers an unknown tool and invalid JSON arguments with error results instead of crashing", async () => {
    mock.addFixture({
      match: { userMessage: "bad calls", hasToolResult: false },
      response: {
        toolCalls: [
          { id: "call_unknown", name: "launch_rockets", arguments: "{}" },
          { id: "call_badjson", name: "echo", arguments: '{"text": "unterminated' },
          { id: "call_badschema", name: "echo", arguments: '{"text": 42}' },
        ],
      },
    });
    mock.addFixture({ match: { userMessage: "bad calls", hasToolResult: true }, response: { content: "recovered" } });
    const { tool, calls } = echoTool();
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(tool));
    expect((await loop.processDirect("bad calls", "s5")).answer).toBe("recovered");
    expect(calls).toHaveLength(0);
    const results = Object.fromEntries((await sessions.load("s5")).flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.content]] : [])));
    expect(results["call_unknown"]).toBe('Error: unknown tool "launch_rockets". Available tools: echo.');
    expect(results["call_badjson"]).toMatch(/^Error: the arguments for echo are not valid JSON: "\{\\"text\\": \\"unterminated"/);
    expect(results["call_badschema"]).toMatch(/^Error: invalid arguments for echo:\n.*text/s);
    const sent = mock.getRequests().at(-1)!.body as WireRequest;
    expect(toolMessages(sent).map((m) => m.tool_call_id)).toEqual(["call_unknown", "call_badjson", "call_badschema"]);
  });

  it("stops at the tool-call limit with the notice, and every call of a cut batch is answered", async () => {
    let turn = 0;
    mock.addFixture({
      match: { userMessage: "never stop" },
      response: () => {
        turn++;
        return {
          toolCalls: [
            { id: `call_${turn}_a`, name: "echo", arguments: JSON.stringify({ text: `${turn}a` }) },
            { id: `call_${turn}_b`, name: "echo", arguments: JSON.stringify({ text: `${turn}b` }) },
          ],
        };
      },
    });
    const { tool, calls } = echoTool();
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(tool), { maxIterations: 3 });
    const finished: string[] = [];
    loop.events.on("message.finished", (e) => finished.push(e.status));
    const answer = (await loop.processDirect("never stop", "s6")).answer;
    expect(answer.endsWith("[Reached the maximum number of tool calls: 3]")).toBe(true);
    expect(calls).toHaveLength(3);
    expect(finished).toEqual(["limit"]);
    const history = await sessions.load("s6");
    expectEveryCallAnswered(history);
    const cut = history.find((m) => m.role === "tool" && m.toolCallId === "call_2_b");
    expect(cut).toMatchObject({ isError: true, content: "Error: not run, the limit of 3 tool calls was reached." });
    expect(history.at(-1)).toEqual({ role: "assistant", content: "[Reached the maximum number of tool calls: 3]" });
  });

  it("writes the limit notice in the zh locale with the real number", async () => {
    mock.addFixture({
      match: { userMessage: "一直调用" },
      response: { toolCalls: [{ name: "echo", arguments: JSON.stringify({ text: "再来" }) }] },
    });
    const { tool } = echoTool();
    const { loop } = await makeAgent(format, mock, new ToolRegistry().register(tool), {
      maxIterations: 2,
      locale: "zh",
    });
    expect((await loop.processDirect("一直调用", "s7")).answer).toBe("\n\n[达到最大工具调用次数 2]");
  });

  it("cancels mid-stream: the request is aborted and nothing more is yielded", async () => {
    mock.onMessage("long story", { content: "Once upon a time there was a daemon that never slept at all." }, { latency: 40 });
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry());
    const cancel = new CancelToken();
    const chunks: string[] = [];
    const statuses: string[] = [];
    loop.events.on("message.finished", (e) => statuses.push(e.status));
    for await (const chunk of loop.processMessage("long story", "s8", { cancelToken: cancel })) {
      chunks.push(chunk);
      if (chunks.length === 2) cancel.cancel();
    }
    expect(chunks).toHaveLength(2);
    expect(statuses).toEqual(["cancelled"]);
    expectEveryCallAnswered(await sessions.load("s8"));
  });

  it("cancels before a tool: the remaining calls are answered as not run and no further LLM call is made", async () => {
    mock.addFixture({
      match: { userMessage: "stop me" },
      response: {
        toolCalls: [
          { id: "call_stop", name: "stopper", arguments: "{}" },
          { id: "call_after", name: "echo", arguments: JSON.stringify({ text: "must not run" }) },
        ],
      },
    });
    const cancel = new CancelToken();
    const stopper = defineTool({
      name: "stopper",
      description: "Presses the cancel button.",
      parameters: z.object({}),
      async execute() {
        cancel.cancel();
        return "pressed";
      },
    });
    const { tool, calls } = echoTool();
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(stopper, tool));
    const answer = (await loop.processDirect("stop me", "s9", { cancelToken: cancel })).answer;
    expect(answer).toBe("");
    expect(calls).toHaveLength(0);
    expect(mock.getRequests()).toHaveLength(1);
    const history = await sessions.load("s9");
    expectEveryCallAnswered(history);
    expect(history.find((m) => m.role === "tool" && m.toolCallId === "call_after")).toMatchObject({
      content: "Error: not run, the run was cancelled.",
    });
  });

  it("waits out a 429 with Retry-After and then succeeds", async () => {
    mock.on({ userMessage: "busy", sequenceIndex: 0 }, {
      error: { message: "slow down", type: "rate_limit_error" },
      status: 429,
      retryAfter: 0.05,
    } as never);
    mock.on({ userMessage: "busy", sequenceIndex: 1 }, { content: "made it" });
    const { loop } = await makeAgent(format, mock, new ToolRegistry());
    const llmCalls: Array<{ attempts: number }> = [];
    loop.events.on("llm.finished", (e) => llmCalls.push(e));
    expect((await loop.processDirect("busy", "s10")).answer).toBe("made it");
    expect(mock.getRequests().map((r) => r.response.status)).toEqual([429, 200]);
    expect(llmCalls).toEqual([expect.objectContaining({ attempts: 2 })]);
  });

  it("gives up after the configured attempts of HTTP 500 with a typed error", async () => {
    mock.onMessage("always down", { error: { message: "upstream exploded", type: "server_error" }, status: 500 });
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry(), { attempts: 3 });
    const error = await loop.processDirect("always down", "s11").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LLMError);
    expect(error).toMatchObject({ kind: "server", status: 500, attempts: 3 });
    expect(mock.getRequests()).toHaveLength(3);
    expect((await sessions.load("s11")).map((m) => m.role)).toEqual(["user"]);
  });

  it("retries a stream dropped before any answer text, and surfaces one dropped after text", async () => {
    mock.on(
      { userMessage: "dropped early", sequenceIndex: 0 },
      { toolCalls: [{ name: "echo", arguments: JSON.stringify({ text: "x".repeat(400) }) }] },
      { truncateAfterChunks: 2, latency: 1 },
    );
    mock.on({ userMessage: "dropped early", sequenceIndex: 1 }, { content: "second try worked" });
    const { tool, calls } = echoTool();
    const agent = await makeAgent(format, mock, new ToolRegistry().register(tool));
    expect((await agent.loop.processDirect("dropped early", "s12")).answer).toBe("second try worked");
    expect(calls).toHaveLength(0);

    mock.onMessage(
      "dropped late",
      { content: "This answer is cut off somewhere in the middle of it." },
      { truncateAfterChunks: 4, latency: 1 },
    );
    const chunks: string[] = [];
    const error = await (async () => {
      for await (const chunk of agent.loop.processMessage("dropped late", "s13")) chunks.push(chunk);
    })().catch((e: unknown) => e);
    expect(chunks.length).toBeGreaterThan(0);
    expect(error).toMatchObject({ name: "LLMError", kind: "stream" });
  });

  it("collects reasoning without yielding it and sends it back with the tool call", async () => {
    mock.addFixture({
      match: { userMessage: "think first", hasToolResult: false },
      response: {
        reasoning: "The user wants the echo tool; I will call it.",
        toolCalls: [{ name: "echo", arguments: JSON.stringify({ text: "thought through" }) }],
      },
    });
    mock.addFixture({
      match: { userMessage: "think first", hasToolResult: true },
      response: { reasoning: "Now I can answer.", content: "final answer" },
    });
    const { tool } = echoTool();
    const { loop, sessions } = await makeAgent(format, mock, new ToolRegistry().register(tool));
    const answer = (await loop.processDirect("think first", "s14")).answer;
    expect(answer).toBe("final answer");
    const assistant = (await sessions.load("s14")).find((m) => m.role === "assistant" && m.toolCalls);
    expect(assistant).toMatchObject({ reasoning: { text: "The user wants the echo tool; I will call it." } });
    if (format === "anthropic") {
      expect(assistant).toMatchObject({
        reasoning: { blocks: [expect.objectContaining({ type: "thinking", signature: expect.any(String) })] },
      });
    } else {
      const second = mock.getRequests().at(-1)!.body as { messages: Array<Record<string, unknown>> };
      expect(second.messages.find((m) => m["role"] === "assistant")).toMatchObject({
        reasoning_content: "The user wants the echo tool; I will call it.",
      });
    }
  });

  // aimock journals Anthropic requests without their images: see the scripted-server tests below.
  it.runIf(format === "openai")("sends images given as paths as image content", async () => {
    mock.onMessage("describe the picture", { content: "a single pixel" });
    const agent = await makeAgent(format, mock, new ToolRegistry());
    const image = join(agent.workspace, "..", "pixel.png");
    await writeFile(image, png);
    expect((await agent.loop.processDirect("describe the picture", "s15", { media: [image] })).answer).toBe("a single pixel");
    const sent = JSON.stringify(mock.getRequests().at(-1)!.body);
    expect(sent).toContain(png.toString("base64"));
  });

  it("summarises history beyond maxHistory into MEMORY.md before answering", async () => {
    mock.addFixture({
      match: { predicate: (req) => textOf(req.messages.at(-1)?.content).includes("old question 0") },
      response: { content: "The user asked about disk usage on the backup server." },
    });
    mock.onMessage("what next", { content: "Next: rotate the logs." });
    const agent = await makeAgent(format, mock, new ToolRegistry(), { maxHistory: 4 });
    const old: ChatMessage[] = Array.from({ length: 6 }, (_, i) =>
      i % 2 === 0 ? { role: "user", content: `old question ${i}` } : { role: "assistant", content: `old answer ${i}` },
    );
    await agent.sessions.append("s16", old);
    expect((await agent.loop.processDirect("what next", "s16")).answer).toBe("Next: rotate the logs.");
    const memory = await readFile(agent.memory.path, "utf8");
    expect(memory).toMatch(/^\d{4}-\d{2}-\d{2}\|auto-overflow\|The user asked about disk usage on the backup server\.$/m);
    const history = await agent.sessions.load("s16");
    expect(history.some((m) => m.content === "old question 0")).toBe(false);
  });

  it("keeps the whole history and still answers when the overflow summary fails", async () => {
    mock.addFixture({
      match: { predicate: (req) => textOf(req.messages.at(-1)?.content).includes("old question 0") },
      response: { error: { message: "context too long", type: "invalid_request_error" }, status: 400 },
    });
    mock.onMessage("what next", { content: "Next: rotate the logs." });
    const agent = await makeAgent(format, mock, new ToolRegistry(), { maxHistory: 4 });
    const old: ChatMessage[] = Array.from({ length: 6 }, (_, i) =>
      i % 2 === 0 ? { role: "user", content: `old question ${i}` } : { role: "assistant", content: `old answer ${i}` },
    );
    await agent.sessions.append("s18", old);
    const warnings: string[] = [];
    agent.loop.events.on("warning", (e) => warnings.push(e.message));
    expect((await agent.loop.processDirect("what next", "s18")).answer).toBe("Next: rotate the logs.");
    expect(warnings).toEqual([expect.stringMatching(/^history not summarised: .*context too long/)]);
    const history = await agent.sessions.load("s18");
    expect(history.slice(0, 6)).toEqual(old);
    expect(history).toHaveLength(8);
  });

  it("writes every LLM call and tool call to the audit log, with secrets redacted", async () => {
    const secretText = "hunter2-database-password";
    mock.addFixture({
      match: { userMessage: "audit me", hasToolResult: false },
      response: {
        toolCalls: [{ name: "echo", arguments: JSON.stringify({ text: `key ${TEST_KEYS[format]} pw ${secretText}` }) }],
      },
    });
    mock.addFixture({ match: { userMessage: "audit me", hasToolResult: true }, response: { content: "audited" } });
    const { tool } = echoTool();
    const agent = await makeAgent(format, mock, new ToolRegistry().register(tool));
    const logs = join(agent.stateDir, "..", "logs");
    const audit = new AuditLog({ dir: logs, secrets: [TEST_KEYS[format], secretText] });
    audit.attach(agent.loop.events);
    expect((await agent.loop.processDirect("audit me", "s17")).answer).toBe("audited");
    await audit.close();
    const [file] = await readdir(logs);
    const text = await readFile(join(logs, file!), "utf8");
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l["kind"] === "llm")).toHaveLength(2);
    expect(lines.find((l) => l["kind"] === "tool")).toMatchObject({ session: "s17", tool: "echo", status: "ok", attempts: 1 });
    expect(lines.find((l) => l["kind"] === "message")).toMatchObject({ status: "ok", toolCalls: 1 });
    expect(text).toContain("[REDACTED]");
    expect(text).not.toContain(TEST_KEYS[format]);
    expect(text).not.toContain(secretText);
  });
});

describe("AgentLoop over the anthropic wire format, against a scripted server", () => {
  let server: AnthropicSSEServer;
  beforeAll(async () => {
    server = await startAnthropicSSE();
  });
  afterAll(async () => {
    await server.close();
  });

  const stream = (blocks: Array<Record<string, unknown>>, stopReason: string) => ({
    sse: [
      {
        type: "message_start",
        message: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          model: "claude-sonnet-5",
          content: [],
          usage: { input_tokens: 5, output_tokens: 0 },
        },
      },
      ...blocks.flatMap((block, index) => [
        { type: "content_block_start", index, content_block: block["start"] },
        ...(block["deltas"] as Array<Record<string, unknown>>).map((delta) => ({ type: "content_block_delta", index, delta })),
        { type: "content_block_stop", index },
      ]),
      { type: "message_delta", delta: { stop_reason: stopReason }, usage: { output_tokens: 3 } },
      { type: "message_stop" },
    ],
  });

  it("answers invalid JSON tool input with an error result the LLM reads", async () => {
    server.reply(
      stream(
        [
          {
            start: { type: "tool_use", id: "toolu_bad", name: "echo", input: {} },
            deltas: [{ type: "input_json_delta", partial_json: '{"text": "cut' }],
          },
        ],
        "tool_use",
      ),
      stream([{ start: { type: "text", text: "" }, deltas: [{ type: "text_delta", text: "recovered" }] }], "end_turn"),
    );
    const { tool, calls } = echoTool();
    const { loop } = await makeAgent("anthropic", server, new ToolRegistry().register(tool));
    expect((await loop.processDirect("bad json", "a1")).answer).toBe("recovered");
    expect(calls).toHaveLength(0);
    const second = server.bodies.at(-1) as { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> };
    expect(second.messages.at(-1)!.content).toEqual([
      expect.objectContaining({
        type: "tool_result",
        tool_use_id: "toolu_bad",
        is_error: true,
        content: expect.stringMatching(/^Error: the arguments for echo are not valid JSON: "\{\\"text\\": \\"cut"/),
      }),
    ]);
  });

  it("sends images given as paths as base64 image blocks", async () => {
    server.reply(stream([{ start: { type: "text", text: "" }, deltas: [{ type: "text_delta", text: "a single pixel" }] }], "end_turn"));
    const agent = await makeAgent("anthropic", server, new ToolRegistry());
    const image = join(agent.workspace, "..", "pixel.png");
    await writeFile(image, png);
    expect((await agent.loop.processDirect("describe the picture", "a2", { media: [image] })).answer).toBe("a single pixel");
    const sent = server.bodies.at(-1) as { messages: Array<{ content: unknown }> };
    expect(sent.messages.at(-1)!.content).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } },
      { type: "text", text: "describe the picture" },
    ]);
  });
});
