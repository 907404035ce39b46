import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { useAimock } from "../support/aimock.js";
import { collect, collectFailure } from "../support/streams.js";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { LLMError } from "../../src/providers/errors.js";
import { OpenAIProvider } from "../../src/providers/openai.js";
import type { ChatMessage, ChatOptions, StreamEvent, ToolDefinition } from "../../src/providers/types.js";
import { chunk, data, DONE, startSseServer, type ScriptedReply, type SseServer } from "../support/sse-server.js";

const options: ChatOptions = { model: "gpt-4o-mini", temperature: 0.7, maxTokens: 256 };
const ask = (text: string): ChatMessage[] => [{ role: "user", content: text }];
const readFile: ToolDefinition = {
  type: "function",
  function: { name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } },
};

const ofType = <T extends StreamEvent["type"]>(events: StreamEvent[], type: T) =>
  events.filter((event): event is Extract<StreamEvent, { type: T }> => event.type === type);
const textOf = (events: StreamEvent[]) =>
  ofType(events, "text")
    .map((event) => event.text)
    .join("");
const callsOf = (events: StreamEvent[]) => ofType(events, "tool_call").map((event) => event.call);

describe("OpenAIProvider against aimock", () => {
  const mock = useAimock();
  let provider: OpenAIProvider;

  beforeAll(() => {
    provider = new OpenAIProvider({ name: "aimock", baseURL: `${mock.url}/v1`, apiKey: "test-key" });
  });

  const lastBody = () => mock.getLastRequest()?.body as Record<string, unknown>;

  it("streams a plain answer as several text events that add up to the whole answer", async () => {
    const answer = "The quick brown fox jumps over the lazy dog.";
    mock.onMessage("fox", { content: answer }, { chunkSize: 5 });

    const events = await collect(provider.chatStream(ask("tell me about the fox"), [], options));

    expect(ofType(events, "text").length).toBeGreaterThan(3);
    expect(textOf(events)).toBe(answer);
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop", raw: "stop" });
    expect(lastBody()).toMatchObject({ stream: true, stream_options: { include_usage: true }, temperature: 0.7, max_tokens: 256 });
  });

  it("assembles one streamed tool call with parsed arguments", async () => {
    mock.onToolCall(
      "read_file",
      { toolCalls: [{ id: "call_1", name: "read_file", arguments: '{"path":"notes/today.md"}' }] },
      { chunkSize: 4 },
    );

    const events = await collect(provider.chatStream(ask("read my notes"), [readFile], options));

    expect(callsOf(events)).toEqual([
      { id: "call_1", name: "read_file", arguments: { path: "notes/today.md" }, rawArguments: '{"path":"notes/today.md"}' },
    ]);
    expect(textOf(events)).toBe("");
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls", raw: "tool_calls" });
    expect(lastBody().tools).toEqual([readFile]);
  });

  it("assembles two tool calls of one turn, each with its own arguments", async () => {
    mock.onToolCall(
      "read_file",
      {
        toolCalls: [
          { id: "call_a", name: "read_file", arguments: '{"path":"a.txt"}' },
          { id: "call_b", name: "read_file", arguments: '{"path":"b.txt"}' },
        ],
      },
      { chunkSize: 3 },
    );

    const calls = callsOf(await collect(provider.chatStream(ask("read both"), [readFile], options)));

    expect(calls.map((call) => [call.id, call.arguments])).toEqual([
      ["call_a", { path: "a.txt" }],
      ["call_b", { path: "b.txt" }],
    ]);
  });

  it("keeps the raw text and gives null arguments when the model streams invalid JSON", async () => {
    mock.onToolCall("read_file", { toolCalls: [{ id: "call_1", name: "read_file", arguments: '{"path": "a.txt",' }] });

    const [call] = callsOf(await collect(provider.chatStream(ask("read"), [readFile], options)));

    expect(call).toEqual({ id: "call_1", name: "read_file", arguments: null, rawArguments: '{"path": "a.txt",' });
  });

  it("yields reasoning_content as reasoning events and never as answer text", async () => {
    const reasoning = "The user wants a number. Six times seven is forty-two.";
    mock.onMessage("six times seven", { content: "42", reasoning }, { chunkSize: 8 });

    const events = await collect(provider.chatStream(ask("six times seven?"), [], { ...options, model: "deepseek-reasoner" }));

    expect(ofType(events, "reasoning").length).toBeGreaterThan(1);
    expect(
      ofType(events, "reasoning")
        .map((event) => event.text)
        .join(""),
    ).toBe(reasoning);
    expect(textOf(events)).toBe("42");
  });

  it("sends the conversation in wire form: both system messages, tool calls with raw arguments, reasoning_content, tool results", async () => {
    mock.on({ predicate: () => true }, { content: "done" });
    const history: ChatMessage[] = [
      { role: "system", content: "You are countd." },
      { role: "system", content: "Today is Monday." },
      { role: "user", content: "read a.txt" },
      {
        role: "assistant",
        content: null,
        reasoning: { text: "I should read the file first." },
        toolCalls: [{ id: "call_1", name: "read_file", arguments: { path: "a.txt" }, rawArguments: '{"path": "a.txt"}' }],
      },
      { role: "tool", toolCallId: "call_1", name: "read_file", content: "hello" },
      { role: "assistant", content: "It says hello.", reasoning: { text: "" } },
      { role: "user", content: "thanks" },
    ];

    await collect(provider.chatStream(history, [readFile], { ...options, model: "deepseek-reasoner" }));

    expect(lastBody().messages).toEqual([
      { role: "system", content: "You are countd." },
      { role: "system", content: "Today is Monday." },
      { role: "user", content: "read a.txt" },
      {
        role: "assistant",
        content: null,
        reasoning_content: "I should read the file first.",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path": "a.txt"}' } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "hello" },
      { role: "assistant", content: "It says hello." },
      { role: "user", content: "thanks" },
    ]);
  });

  it("passes image parts to the server as image_url data URLs", async () => {
    mock.on({ predicate: () => true }, { content: "a red pixel" });
    const image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    const content = [
      { type: "image_url" as const, image_url: { url: image } },
      { type: "text" as const, text: "what is this?" },
    ];

    await collect(provider.chatStream([{ role: "user", content }], [], options));

    expect(lastBody().messages).toEqual([{ role: "user", content }]);
  });

  it("maps the usage the server reports", async () => {
    mock.onMessage("count", { content: "ok", usage: { prompt_tokens: 120, completion_tokens: 7 } });

    const events = await collect(provider.chatStream(ask("count tokens"), [], options));

    expect(ofType(events, "usage")).toEqual([
      { type: "usage", usage: { inputTokens: 120, outputTokens: 7, cachedInputTokens: 0, cacheWriteTokens: 0 } },
    ]);
  });

  it("turns a 429 into a rate_limit error carrying the server's Retry-After", async () => {
    mock.onMessage("busy", { error: { message: "Rate limit reached for requests", type: "rate_limit_error" }, status: 429, retryAfter: 2 });

    const { error } = await collectFailure(provider.chatStream(ask("busy?"), [], options));

    expect(error).toMatchObject({ kind: "rate_limit", status: 429, retryAfterMs: 2000 });
    expect(error.message).toContain("Rate limit reached for requests");
    expect(error.message).toContain("aimock at http://127.0.0.1");
  });

  it("turns a 500 into a server error", async () => {
    mock.onMessage("broken", { error: { message: "upstream exploded", type: "server_error" }, status: 500 });

    const { error } = await collectFailure(provider.chatStream(ask("broken?"), [], options));

    expect(error).toMatchObject({ kind: "server", status: 500 });
    expect(error.message).toBe(`HTTP 500: upstream exploded (aimock at ${mock.url}/v1, model gpt-4o-mini)`);
  });

  it("turns a stream dropped after some text into a stream error, keeping the text already yielded", async () => {
    const answer = "This answer will be cut off in the middle.";
    // Without a pause between chunks aimock destroys the socket before the headers leave, which
    // the client sees as a refused response, not a broken stream.
    mock.onMessage("long", { content: answer }, { chunkSize: 4, truncateAfterChunks: 5, latency: 1 });

    const { events, error } = await collectFailure(provider.chatStream(ask("a long answer"), [], options));

    expect(error.kind).toBe("stream");
    expect(textOf(events)).not.toBe("");
    expect(answer.startsWith(textOf(events))).toBe(true);
    expect(textOf(events).length).toBeLessThan(answer.length);
    expect(ofType(events, "finish")).toEqual([]);
  });
});

describe("OpenAIProvider against hand-written SSE", () => {
  let server: SseServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function run(reply: ScriptedReply, chatOptions: ChatOptions = options) {
    server = await startSseServer([reply]);
    const provider = new OpenAIProvider({ name: "scripted", baseURL: server.baseURL, apiKey: "test-key" });
    return provider.chatStream(ask("go"), [readFile], chatOptions);
  }

  it("assembles tool calls whose fragments carry no index: a new id starts a call, no id continues it", async () => {
    const events = await collect(
      await run({
        events: [
          chunk({ role: "assistant", tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: "" } }] }),
          chunk({ tool_calls: [{ function: { arguments: '{"path":' } }] }),
          chunk({ tool_calls: [{ function: { arguments: '"a.txt"}' } }] }),
          chunk({ tool_calls: [{ id: "c2", type: "function", function: { name: "list_dir", arguments: '{"dir":"."}' } }] }),
          chunk({}, "tool_calls"),
          DONE,
        ],
      }),
    );

    expect(callsOf(events)).toEqual([
      { id: "c1", name: "read_file", arguments: { path: "a.txt" }, rawArguments: '{"path":"a.txt"}' },
      { id: "c2", name: "list_dir", arguments: { dir: "." }, rawArguments: '{"dir":"."}' },
    ]);
  });

  it("treats index 0 reused with a new id as a second call", async () => {
    const events = await collect(
      await run({
        events: [
          chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a.txt"}' } }] }),
          chunk({ tool_calls: [{ index: 0, id: "c2", type: "function", function: { name: "read_file", arguments: "" } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path":"b.txt"}' } }] }),
          chunk({}, "tool_calls"),
          DONE,
        ],
      }),
    );

    expect(callsOf(events).map((call) => [call.id, call.arguments])).toEqual([
      ["c1", { path: "a.txt" }],
      ["c2", { path: "b.txt" }],
    ]);
  });

  it("yields one finish and one usage when the server repeats finish_reason and puts usage on the finish chunk", async () => {
    const usage = { prompt_tokens: 50, completion_tokens: 3, total_tokens: 53, prompt_tokens_details: { cached_tokens: 32 } };
    const events = await collect(
      await run({
        events: [chunk({ role: "assistant", content: "Hi" }), chunk({}, "stop", { usage }), chunk({}, "stop"), DONE],
      }),
    );

    expect(events).toEqual([
      { type: "text", text: "Hi" },
      { type: "usage", usage: { inputTokens: 50, outputTokens: 3, cachedInputTokens: 32, cacheWriteTokens: 0 } },
      { type: "finish", reason: "stop", raw: "stop" },
    ]);
  });

  it("reads DeepSeek's prompt_cache_hit_tokens as cached input", async () => {
    const usage = { prompt_tokens: 900, completion_tokens: 10, prompt_cache_hit_tokens: 768, prompt_cache_miss_tokens: 132 };
    const events = await collect(
      await run({
        events: [chunk({ content: "ok" }), chunk({}, "stop"), data({ id: "x", object: "chat.completion.chunk", choices: [], usage }), DONE],
      }),
    );

    expect(ofType(events, "usage")).toEqual([
      { type: "usage", usage: { inputTokens: 900, outputTokens: 10, cachedInputTokens: 768, cacheWriteTokens: 0 } },
    ]);
  });

  it("yields delta.reasoning as reasoning, not text", async () => {
    const events = await collect(
      await run({ events: [chunk({ reasoning: "thinking about it" }), chunk({ content: "answer" }), chunk({}, "stop"), DONE] }),
    );

    expect(events.slice(0, 2)).toEqual([
      { type: "reasoning", text: "thinking about it" },
      { type: "text", text: "answer" },
    ]);
  });

  it.each([
    ["length", "length"],
    ["content_filter", "content_filter"],
    ["eos_token", "other"],
  ])("maps finish_reason %s to %s and keeps the raw value", async (raw, reason) => {
    const events = await collect(await run({ events: [chunk({ content: "x" }), chunk({}, raw), DONE] }));

    expect(events.at(-1)).toEqual({ type: "finish", reason, raw });
  });

  it("turns a stream that ends without a finish_reason into a stream error", async () => {
    const { events, error } = await collectFailure(await run({ events: [chunk({ content: "half an ans" })] }));

    expect(textOf(events)).toBe("half an ans");
    expect(error.kind).toBe("stream");
    expect(error.message).toContain("ended before a finish_reason");
  });

  it.each([
    ["a web page at base_url", "text/html; charset=utf-8", "<html>Welcome</html>"],
    ["garbage JSON", "application/json", "{malformed json: <<<chaos>>>"],
  ])("names what a 200 answer held when it was not an event stream: %s", async (_, contentType, body) => {
    const { events, error } = await collectFailure(await run({ headers: { "content-type": contentType }, body }));

    expect(events).toEqual([]);
    expect(error.kind).toBe("stream");
    expect(error.message).toBe(
      `the server answered 200 with ${contentType}, not an event stream (scripted at ${server!.baseURL}, model gpt-4o-mini)`,
    );
  });

  it("turns a dropped connection into a stream error", async () => {
    const { error } = await collectFailure(await run({ events: [chunk({ content: "Hel" })], after: "drop" }));

    expect(error.kind).toBe("stream");
  });

  it("turns a malformed JSON chunk into a stream error", async () => {
    const { events, error } = await collectFailure(
      await run({ events: [chunk({ content: "fine so far" }), 'data: {"choices": [{"delta": {"content": "bro', DONE] }),
    );

    expect(textOf(events)).toBe("fine so far");
    expect(error.kind).toBe("stream");
    expect(error.message).toContain("the stream broke");
  });

  it("turns an error event inside the stream into a stream error with the server's message", async () => {
    const { error } = await collectFailure(
      await run({ events: [chunk({ content: "Hi" }), `event: error\n${data({ error: { message: "model overloaded mid-stream" } })}`] }),
    );

    expect(error.kind).toBe("stream");
    expect(error.message).toContain("model overloaded mid-stream");
  });

  it("ends a stalled stream with a cancelled error when the signal is aborted", async () => {
    const controller = new AbortController();
    const stream = await run({ events: [chunk({ content: "first words" })], after: "stall" }, { ...options, signal: controller.signal });

    const events: StreamEvent[] = [];
    const error = await (async () => {
      try {
        for await (const event of stream) {
          events.push(event);
          if (event.type === "text") controller.abort();
        }
      } catch (err) {
        return err;
      }
      return undefined;
    })();

    expect(events).toEqual([{ type: "text", text: "first words" }]);
    expect(error).toBeInstanceOf(LLMError);
    expect((error as LLMError).kind).toBe("cancelled");
  });

  it("sends no request when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort();

    const { error } = await collectFailure(await run({ events: [] }, { ...options, signal: controller.signal }));

    expect(error.kind).toBe("cancelled");
    expect(server?.requests).toEqual([]);
  });
});

it("turns a refused connection into a connection error naming the endpoint", async () => {
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port: free } = probe.address() as AddressInfo;
      probe.close(() => resolve(free));
    });
  });
  const provider = new OpenAIProvider({ name: "local", baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none" });

  const { error } = await collectFailure(provider.chatStream(ask("hi"), [], options));

  expect(error.kind).toBe("connection");
  expect(error.message).toContain("ECONNREFUSED");
  expect(error.message).toContain(`local at http://127.0.0.1:${port}/v1`);
});
