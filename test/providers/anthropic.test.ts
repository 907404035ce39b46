import { createServer } from "node:net";
import { useAimock } from "../support/aimock.js";
import { collect, collectFailure } from "../support/streams.js";
import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { CancelToken } from "../../src/agent/cancel.js";
import { AnthropicProvider } from "../../src/providers/anthropic.js";
import type { LLMErrorKind } from "../../src/providers/errors.js";
import { withRetry } from "../../src/providers/retry.js";
import type {
  ChatMessage,
  ChatOptions,
  LLMProvider,
  StreamEvent,
  ThinkingBlock,
  ToolCall,
  ToolDefinition,
} from "../../src/providers/types.js";
import { startAnthropicSSE, type AnthropicSSEServer } from "../support/anthropic-sse.js";
import { listenLoopback } from "../support/loopback.js";

const MODEL = "claude-sonnet-4-6";
const OPTIONS: ChatOptions = { model: MODEL, temperature: 0.7, maxTokens: 4096 };
const API_KEY = "sk-ant-test-key";

const readFileTool: ToolDefinition = {
  type: "function",
  function: {
    name: "read_file",
    description: "Read a file in the workspace",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
};

const texts = (events: StreamEvent[]) => events.flatMap((e) => (e.type === "text" ? [e.text] : []));
const reasoning = (events: StreamEvent[]) => events.flatMap((e) => (e.type === "reasoning" ? [e.text] : []));
const toolCalls = (events: StreamEvent[]) => events.flatMap((e) => (e.type === "tool_call" ? [e.call] : []));
const thinkingBlocks = (events: StreamEvent[]) => events.flatMap((e) => (e.type === "thinking_block" ? [e.block] : []));

const user = (content: string): ChatMessage => ({ role: "user", content });

describe("AnthropicProvider against aimock", () => {
  // strict: aimock then also refuses a thinking turn whose tool-use continuation lacks its signed block.
  const mock = useAimock({ chunkSize: 4, strict: true });
  let provider: AnthropicProvider;

  beforeAll(() => {
    provider = new AnthropicProvider({ baseURL: mock.url, apiKey: API_KEY });
  });

  it("streams a plain answer as several text events, then usage and finish", async () => {
    mock.on({ userMessage: "greet me" }, { content: "Hello there, how can I help?", usage: { input_tokens: 12, output_tokens: 7 } });

    const events = await collect(provider.chatStream([user("greet me")], [], OPTIONS));

    expect(texts(events).length).toBeGreaterThan(1);
    expect(texts(events).join("")).toBe("Hello there, how can I help?");
    expect(events.slice(-2)).toEqual([
      { type: "usage", usage: { inputTokens: 12, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 7 } },
      { type: "finish", reason: "stop", raw: "end_turn" },
    ]);
    expect(mock.getRequests()).toHaveLength(1);
    expect(mock.getRequests()[0]!.path).toBe("/v1/messages");
  });

  it("assembles one streamed tool call with parsed arguments", async () => {
    mock.on({ userMessage: "read notes" }, { toolCalls: [{ id: "toolu_1", name: "read_file", arguments: '{"path":"notes/today.md"}' }] });

    const events = await collect(provider.chatStream([user("read notes")], [readFileTool], OPTIONS));

    expect(toolCalls(events)).toEqual([
      { id: "toolu_1", name: "read_file", arguments: { path: "notes/today.md" }, rawArguments: '{"path":"notes/today.md"}' },
    ]);
    expect(texts(events)).toEqual([]);
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls", raw: "tool_use" });
  });

  it("assembles two tool calls of one turn separately, in order", async () => {
    mock.on(
      { userMessage: "compare" },
      {
        toolCalls: [
          { id: "toolu_a", name: "read_file", arguments: '{"path":"a.txt"}' },
          { id: "toolu_b", name: "read_file", arguments: '{"path":"b/longer-name.txt"}' },
        ],
      },
    );

    const calls = toolCalls(await collect(provider.chatStream([user("compare")], [readFileTool], OPTIONS)));

    expect(calls.map((c) => [c.id, c.arguments])).toEqual([
      ["toolu_a", { path: "a.txt" }],
      ["toolu_b", { path: "b/longer-name.txt" }],
    ]);
  });

  it("keeps thinking out of the answer text: reasoning events plus one signed thinking block", async () => {
    mock.on(
      { userMessage: "what is 2+2" },
      { content: "It is 4.", reasoning: "The user asks for a sum; 2 plus 2 makes 4.", reasoningSignature: "sig-abc123" },
    );
    const thinking = new AnthropicProvider({ baseURL: mock.url, apiKey: API_KEY, thinkingBudget: 2048 });

    const events = await collect(thinking.chatStream([user("what is 2+2")], [], OPTIONS));

    expect(reasoning(events).length).toBeGreaterThan(1);
    expect(reasoning(events).join("")).toBe("The user asks for a sum; 2 plus 2 makes 4.");
    expect(thinkingBlocks(events)).toEqual([
      { type: "thinking", thinking: "The user asks for a sum; 2 plus 2 makes 4.", signature: "sig-abc123" },
    ]);
    expect(texts(events).join("")).toBe("It is 4.");
  });

  it("sends the signed thinking block back on the tool-result turn, which a thinking-aware server accepts", async () => {
    mock.on(
      { userMessage: "check the file", hasToolResult: false },
      {
        toolCalls: [{ id: "toolu_t", name: "read_file", arguments: '{"path":"x.md"}' }],
        reasoning: "I should read x.md first.",
        reasoningSignature: "sig-turn-1",
      },
    );
    mock.on({ userMessage: "check the file", hasToolResult: true }, { content: "x.md says hi." });
    const thinking = new AnthropicProvider({ baseURL: mock.url, apiKey: API_KEY, thinkingBudget: 2048 });

    const first = await collect(thinking.chatStream([user("check the file")], [readFileTool], OPTIONS));
    const [call] = toolCalls(first) as [ToolCall];
    const assistant: ChatMessage = {
      role: "assistant",
      content: null,
      toolCalls: [call],
      reasoning: { text: reasoning(first).join(""), blocks: thinkingBlocks(first) },
    };
    const toolResult: ChatMessage = { role: "tool", toolCallId: call.id, name: call.name, content: "hi" };

    const second = await collect(thinking.chatStream([user("check the file"), assistant, toolResult], [readFileTool], OPTIONS));
    expect(texts(second).join("")).toBe("x.md says hi.");

    // The same turn without its thinking block is refused, so the acceptance above is meaningful.
    const stripped = { ...assistant, reasoning: { text: "" } };
    const refused = await collectFailure(thinking.chatStream([user("check the file"), stripped, toolResult], [readFileTool], OPTIONS));
    expect(refused.error).toMatchObject({ kind: "client", status: 400 });
    expect(refused.error.message).toContain("thinking");
  });

  it.each([
    ["stop", "end_turn", "stop"],
    ["length", "max_tokens", "length"],
    ["refusal", "refusal", "content_filter"],
    ["pause_turn", "pause_turn", "other"],
  ] as const)("maps fixture finish %s (stop_reason %s) to %s", async (fixtureReason, raw, reason) => {
    mock.on({ userMessage: "finish" }, { content: "partial", finishReason: fixtureReason });

    const events = await collect(provider.chatStream([user("finish")], [], OPTIONS));

    expect(events.at(-1)).toEqual({ type: "finish", reason, raw });
  });

  it("turns 429 into rate_limit with the server's retry-after", async () => {
    mock.on(
      { userMessage: "busy" },
      { error: { message: "Number of requests exceeded", type: "rate_limit_error" }, status: 429, retryAfter: 7 },
    );

    const { error } = await collectFailure(provider.chatStream([user("busy")], [], OPTIONS));

    expect(error).toMatchObject({ kind: "rate_limit", status: 429, retryAfterMs: 7000 });
    expect(error.message).toContain("Number of requests exceeded");
  });

  it.each([
    [529, "overloaded_error", "overloaded"],
    [500, "api_error", "server"],
    [401, "authentication_error", "client"],
  ] as const)("turns HTTP %i into %s → %s", async (status, type, kind) => {
    mock.on({ userMessage: "fail" }, { error: { message: `scripted ${type}`, type }, status });

    const { error } = await collectFailure(provider.chatStream([user("fail")], [], OPTIONS));

    expect(error).toMatchObject({ kind, status });
    expect(error.message).toContain(`scripted ${type}`);
  });

  it("turns a connection dropped mid-answer into a stream error", async () => {
    // The latency lets the first frames reach the client before the server cuts the connection.
    mock.on(
      { userMessage: "long story" },
      { content: "Once upon a time, in a land far away, there lived" },
      { truncateAfterChunks: 6, latency: 10 },
    );

    const { events: seen, error } = await collectFailure(provider.chatStream([user("long story")], [], OPTIONS));

    expect(texts(seen).length).toBeGreaterThan(0);
    expect(error.kind).toBe("stream");
    expect(seen.some((e) => e.type === "finish")).toBe(false);
  });

  it.each([
    [
      "an AbortController",
      () => {
        const controller = new AbortController();
        return { signal: controller.signal, cancel: () => controller.abort() };
      },
    ],
    // CancelToken aborts with its own Error as the reason rather than an AbortError; still a cancel.
    [
      "a CancelToken",
      () => {
        const token = new CancelToken();
        return { signal: token.signal, cancel: () => token.cancel() };
      },
    ],
  ] as const)("stops a slow stream as soon as it is cancelled through %s", async (_via, cancellable) => {
    // At one chunk per 100 ms this answer outlasts the test timeout; only a working abort ends it in time.
    mock.on({ userMessage: "slow" }, { content: "x".repeat(400) }, { chunkSize: 1, latency: 100 });
    const seen: StreamEvent[] = [];
    const { signal, cancel } = cancellable();

    const run = (async () => {
      for await (const event of provider.chatStream([user("slow")], [], { ...OPTIONS, signal })) {
        seen.push(event);
        if (event.type === "text") cancel();
      }
    })();

    await expect(run).rejects.toMatchObject({ name: "LLMError", kind: "cancelled" });
    expect(texts(seen)).toEqual(["x"]);
  });

  it("cancels a request still waiting for its response", async () => {
    // The first frame, and with it the response headers, would come only after 10 s.
    mock.on({ userMessage: "thinking hard" }, { content: "late" }, { latency: 10_000 });
    const controller = new AbortController();

    const run = collect(provider.chatStream([user("thinking hard")], [], { ...OPTIONS, signal: controller.signal }));
    await vi.waitUntil(() => mock.getRequests().length === 1);
    controller.abort();

    await expect(run).rejects.toMatchObject({ name: "LLMError", kind: "cancelled" });
  });

  it("gives up on a server that does not answer within timeoutMs, as a connection error", async () => {
    mock.on({ userMessage: "stalled" }, { content: "late" }, { latency: 2_000 });
    const impatient = new AnthropicProvider({ baseURL: mock.url, apiKey: API_KEY, timeoutMs: 100 });

    const { error } = await collectFailure(impatient.chatStream([user("stalled")], [], OPTIONS));

    expect(error.kind).toBe("connection");
    expect(error.message).toMatch(/timed out/i);
  });

  it("is retried by withRetry only: three 500s make exactly three requests", async () => {
    mock.on({ userMessage: "flaky" }, { error: { message: "boom", type: "api_error" }, status: 500 });
    const retried: LLMProvider = withRetry(provider, { attempts: 3, baseDelayMs: 1, maxDelayMs: 50 });

    const { events: seen, error } = await collectFailure(retried.chatStream([user("flaky")], [], OPTIONS));

    expect(error).toMatchObject({ kind: "server", attempts: 3 });
    expect(seen.filter((e) => e.type === "retry")).toHaveLength(2);
    expect(mock.getRequests()).toHaveLength(3);
  });
});

describe("AnthropicProvider wire details (scripted SSE server)", () => {
  let server: AnthropicSSEServer;
  let provider: AnthropicProvider;

  beforeEach(async () => {
    server = await startAnthropicSSE();
    provider = new AnthropicProvider({ baseURL: server.url, apiKey: API_KEY });
    return () => server.close();
  });

  const messageStart = (usage: Record<string, unknown> = { input_tokens: 3, output_tokens: 1 }) => ({
    type: "message_start",
    message: {
      id: "msg_1",
      type: "message",
      role: "assistant",
      content: [],
      model: MODEL,
      stop_reason: null,
      stop_sequence: null,
      usage,
    },
  });
  const messageEnd = (stopReason: string, usage: Record<string, unknown> = { output_tokens: 2 }) => [
    { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage },
    { type: "message_stop" },
  ];
  const textBlock = (index: number, ...chunks: string[]) => [
    { type: "content_block_start", index, content_block: { type: "text", text: "" } },
    ...chunks.map((text) => ({ type: "content_block_delta", index, delta: { type: "text_delta", text } })),
    { type: "content_block_stop", index },
  ];
  const toolUseBlock = (index: number, id: string, name: string, ...fragments: string[]) => [
    { type: "content_block_start", index, content_block: { type: "tool_use", id, name, input: {} } },
    ...fragments.map((partial_json) => ({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } })),
    { type: "content_block_stop", index },
  ];
  const okAnswer = () => ({ sse: [messageStart(), ...textBlock(0, "ok"), ...messageEnd("end_turn")] });

  it("asks a typed answer beside the job's tools with tool_choice any, and gives the answer tool's input as text", async () => {
    const input = '{"open": 3}';
    server.reply({ sse: [messageStart(), ...toolUseBlock(0, "toolu_9", "answer", '{"open"', ": 3}"), ...messageEnd("tool_use")] });
    const schema = { type: "object", properties: { open: { type: "integer" } } };

    const events = await collect(provider.chatStream([user("count")], [readFileTool], { ...OPTIONS, answer: { name: "answer", schema } }));

    const body = server.bodies[0]!;
    expect(body.tool_choice).toEqual({ type: "any", disable_parallel_tool_use: true });
    expect((body.tools as Array<{ name: string }>).map((tool) => tool.name)).toEqual(["read_file", "answer"]);
    expect(body.tools).toContainEqual(expect.objectContaining({ name: "answer", input_schema: schema }));
    expect(texts(events).join("")).toBe(input);
    expect(toolCalls(events)).toEqual([]);
  });

  it("sends system prompts as text blocks, caching only the first, and tools in Anthropic form", async () => {
    server.reply(okAnswer());
    const history: ChatMessage[] = [
      { role: "system", content: "You are countd's agent. Stable rules." },
      { role: "system", content: "Current time: 2026-01-05T08:00:00Z" },
      user("hi"),
    ];

    await collect(provider.chatStream(history, [readFileTool], OPTIONS));

    const body = server.bodies[0]!;
    expect(body.system).toEqual([
      { type: "text", text: "You are countd's agent. Stable rules.", cache_control: { type: "ephemeral" } },
      { type: "text", text: "Current time: 2026-01-05T08:00:00Z" },
    ]);
    expect(body.tools).toEqual([
      {
        name: "read_file",
        description: "Read a file in the workspace",
        input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      },
    ]);
    expect(body).toMatchObject({ model: MODEL, max_tokens: 4096, stream: true });
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }]);
  });

  it("sends images as base64 image blocks beside the text", async () => {
    server.reply(okAnswer());
    const history: ChatMessage[] = [
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "text", text: "What is in this picture?" },
        ],
      },
    ];

    await collect(provider.chatStream(history, [], OPTIONS));

    expect(server.bodies[0]!.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "text", text: "What is in this picture?" },
        ],
      },
    ]);
  });

  it("refuses an image type Anthropic cannot read, naming it, before sending anything", async () => {
    const history: ChatMessage[] = [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/bmp;base64,Qk0=" } }] }];

    const { error } = await collectFailure(provider.chatStream(history, [], OPTIONS));

    expect(error.kind).toBe("client");
    expect(error.message).toContain('"image/bmp"');
    expect(server.bodies).toHaveLength(0);
  });

  it("sends consecutive tool results as one user turn of tool_result blocks, flagging failures", async () => {
    server.reply(okAnswer());
    const calls: ToolCall[] = [
      { id: "toolu_1", name: "read_file", arguments: { path: "a.txt" }, rawArguments: '{"path":"a.txt"}' },
      { id: "toolu_2", name: "read_file", arguments: null, rawArguments: "{path" },
    ];
    const history: ChatMessage[] = [
      user("read both"),
      { role: "assistant", content: "Reading both files.", toolCalls: calls },
      { role: "tool", toolCallId: "toolu_1", name: "read_file", content: "alpha" },
      { role: "tool", toolCallId: "toolu_2", name: "read_file", content: "invalid arguments", isError: true },
      user("and summarise"),
    ];

    await collect(provider.chatStream(history, [readFileTool], OPTIONS));

    expect(server.bodies[0]!.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "read both" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Reading both files." },
          { type: "tool_use", id: "toolu_1", name: "read_file", input: { path: "a.txt" } },
          { type: "tool_use", id: "toolu_2", name: "read_file", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "alpha" },
          { type: "tool_result", tool_use_id: "toolu_2", content: "invalid arguments", is_error: true },
          { type: "text", text: "and summarise" },
        ],
      },
    ]);
  });

  it("collects thinking and redacted thinking, then sends both back unchanged before text and tool use", async () => {
    const thinking = new AnthropicProvider({ baseURL: server.url, apiKey: API_KEY, thinkingBudget: 2048 });
    server.reply(
      {
        sse: [
          messageStart(),
          { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
          { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Need the " } },
          { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "file first." } },
          { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "EqQBCkYIARgCKkD+/sig==" } },
          { type: "content_block_stop", index: 0 },
          { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix/LafPsn4a" } },
          { type: "content_block_stop", index: 1 },
          ...textBlock(2, "Let me look."),
          ...toolUseBlock(3, "toolu_9", "read_file", '{"pa', 'th":"plan.md"}'),
          ...messageEnd("tool_use"),
        ],
      },
      okAnswer(),
    );

    const first = await collect(thinking.chatStream([user("plan")], [readFileTool], OPTIONS));

    const blocks: ThinkingBlock[] = [
      { type: "thinking", thinking: "Need the file first.", signature: "EqQBCkYIARgCKkD+/sig==" },
      { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix/LafPsn4a" },
    ];
    expect(thinkingBlocks(first)).toEqual(blocks);
    expect(reasoning(first).join("")).toBe("Need the file first.");
    expect(texts(first).join("")).toBe("Let me look.");

    const [call] = toolCalls(first) as [ToolCall];
    const history: ChatMessage[] = [
      user("plan"),
      { role: "assistant", content: texts(first).join(""), toolCalls: [call], reasoning: { text: "", blocks: thinkingBlocks(first) } },
      { role: "tool", toolCallId: call.id, name: call.name, content: "# Plan" },
    ];
    await collect(thinking.chatStream(history, [readFileTool], OPTIONS));

    const sent = server.bodies[1]!;
    expect(sent.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
    expect((sent.messages as unknown[])[1]).toEqual({
      role: "assistant",
      content: [
        ...blocks,
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "toolu_9", name: "read_file", input: { path: "plan.md" } },
      ],
    });
  });

  it("never sends temperature, which the API version this SDK speaks rejects", async () => {
    server.reply(okAnswer());

    await collect(provider.chatStream([user("hi")], [], OPTIONS));

    expect(server.bodies[0]).not.toHaveProperty("temperature");
    expect(server.bodies[0]).not.toHaveProperty("thinking");
  });

  it("refuses a thinking budget that leaves no room for the answer, before sending anything", async () => {
    const thinking = new AnthropicProvider({ baseURL: server.url, apiKey: API_KEY, thinkingBudget: 4096 });

    const { error } = await collectFailure(thinking.chatStream([user("hi")], [], OPTIONS));

    expect(error.kind).toBe("client");
    expect(error.message).toContain("thinkingBudget (4096) must be less than maxTokens (4096)");
    expect(server.bodies).toHaveLength(0);
  });

  it("keeps invalid tool JSON as null with the raw text, and reads empty input as {}", async () => {
    server.reply({
      sse: [
        messageStart(),
        ...toolUseBlock(0, "toolu_bad", "read_file", '{"path": "a.txt"', ", oops"),
        ...toolUseBlock(1, "toolu_empty", "list_files"),
        ...messageEnd("tool_use"),
      ],
    });

    const calls = toolCalls(await collect(provider.chatStream([user("go")], [], OPTIONS)));

    expect(calls).toEqual([
      { id: "toolu_bad", name: "read_file", arguments: null, rawArguments: '{"path": "a.txt", oops' },
      { id: "toolu_empty", name: "list_files", arguments: {}, rawArguments: "" },
    ]);
  });

  it("reports cached prompt tokens inside the input total, in one usage event", async () => {
    server.reply({
      sse: [
        messageStart({ input_tokens: 10, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 1 }),
        ...textBlock(0, "ok"),
        ...messageEnd("end_turn", { output_tokens: 42 }),
      ],
    });

    const events = await collect(provider.chatStream([user("hi")], [], OPTIONS));

    expect(events.filter((e) => e.type === "usage")).toEqual([
      { type: "usage", usage: { inputTokens: 130, cachedInputTokens: 100, cacheWriteTokens: 20, outputTokens: 42 } },
    ]);
  });

  it("throws a stream error for an error event inside the stream, naming its type", async () => {
    server.reply({
      sse: [messageStart(), ...textBlock(0, "Partial"), { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }],
    });

    const { events: seen, error } = await collectFailure(provider.chatStream([user("hi")], [], OPTIONS));

    expect(texts(seen)).toEqual(["Partial"]);
    expect(error.kind).toBe("stream");
    expect(error.message).toContain("overloaded_error");
  });

  it("throws a stream error for a malformed event", async () => {
    server.reply({ sse: [messageStart(), "event: content_block_delta\ndata: {not json\n\n"] });

    const { error } = await collectFailure(provider.chatStream([user("hi")], [], OPTIONS));

    expect(error.kind).toBe("stream");
  });

  it("throws a stream error when the server ends the answer before message_stop", async () => {
    server.reply({ sse: [messageStart(), ...textBlock(0, "Half an ans")] });

    const { events: seen, error } = await collectFailure(provider.chatStream([user("hi")], [], OPTIONS));

    expect(texts(seen)).toEqual(["Half an ans"]);
    expect(error.kind).toBe("stream");
    expect(error.message).toContain("message_stop");
  });
});

describe("AnthropicProvider without a server", () => {
  it("reports a refused connection as a connection error naming the address", async () => {
    const probe = createServer();
    const port = await listenLoopback(probe);
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const provider = new AnthropicProvider({ baseURL: `http://127.0.0.1:${port}`, apiKey: API_KEY });

    const { error } = await collectFailure(provider.chatStream([user("hi")], [], OPTIONS));

    expect(error.kind satisfies LLMErrorKind).toBe("connection");
    expect(error.message).toContain(`127.0.0.1:${port}`);
  });
});
