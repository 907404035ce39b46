import { useAimock } from "../support/aimock.js";
import { beforeAll, describe, expect, it } from "vitest";
import { LLMError } from "../../src/providers/errors.js";
import { OpenAIProvider } from "../../src/providers/openai.js";
import { withRetry, type RetryPolicy } from "../../src/providers/retry.js";
import type { ChatMessage, ChatOptions, LLMProvider, StreamEvent } from "../../src/providers/types.js";
import { chunk, DONE, startSseServer } from "../support/sse-server.js";

const policy: RetryPolicy = { attempts: 3, baseDelayMs: 1, maxDelayMs: 50 };
const options: ChatOptions = { model: "deepseek-reasoner", temperature: 0.7, maxTokens: 256 };
const ask = (text: string): ChatMessage[] => [{ role: "user", content: text }];

/** Runs the stream to its end or failure, keeping every event yielded on the way. */
async function drain(stream: AsyncIterable<StreamEvent>): Promise<{ events: StreamEvent[]; error?: LLMError }> {
  const events: StreamEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
    return { events };
  } catch (error) {
    expect(error).toBeInstanceOf(LLMError);
    return { events, error: error as LLMError };
  }
}

const textOf = (events: StreamEvent[]) => events.flatMap((event) => (event.type === "text" ? [event.text] : [])).join("");
const retriesOf = (events: StreamEvent[]) => events.filter((event) => event.type === "retry");

it("waits the server's retry-after-ms after a 429, then succeeds on the second request", async () => {
  const server = await startSseServer([
    { status: 429, headers: { "retry-after-ms": "7" }, body: JSON.stringify({ error: { message: "slow down" } }) },
    { events: [chunk({ role: "assistant", content: "made it" }), chunk({}, "stop"), DONE] },
  ]);
  try {
    const provider = withRetry(new OpenAIProvider({ name: "scripted", baseURL: server.baseURL, apiKey: "k" }), policy);

    const { events, error } = await drain(provider.chatStream(ask("hi"), [], options));

    expect(error).toBeUndefined();
    expect(server.requests).toHaveLength(2);
    expect(retriesOf(events)).toEqual([{ type: "retry", attempt: 1, delayMs: 7, error: expect.any(LLMError) }]);
    expect(textOf(events)).toBe("made it");
  } finally {
    await server.close();
  }
});

describe("withRetry over OpenAIProvider against aimock", () => {
  const mock = useAimock();
  let provider: LLMProvider;

  beforeAll(() => {
    provider = withRetry(new OpenAIProvider({ name: "aimock", baseURL: `${mock.url}/v1`, apiKey: "k" }), policy);
  });

  it("gives up after exactly 3 requests when the server keeps answering 500: the SDK adds no retries of its own", async () => {
    mock.onMessage("fail", { error: { message: "internal error", type: "server_error" }, status: 500 });

    const { events, error } = await drain(provider.chatStream(ask("always fail"), [], options));

    expect(error).toMatchObject({ kind: "server", status: 500, attempts: 3 });
    expect(mock.getRequests()).toHaveLength(3);
    expect(retriesOf(events)).toHaveLength(2);
  });

  it("does not retry a stream that dropped after answer text was shown", async () => {
    mock.onMessage("story", { content: "Once upon a time there was a daemon." }, { chunkSize: 4, truncateAfterChunks: 5, latency: 1 });

    const { events, error } = await drain(provider.chatStream(ask("tell a story"), [], options));

    expect(textOf(events)).not.toBe("");
    expect(error).toMatchObject({ kind: "stream", attempts: 1 });
    expect(mock.getRequests()).toHaveLength(1);
    expect(retriesOf(events)).toEqual([]);
  });

  it("retries a stream that dropped while the model was still reasoning, before any answer text", async () => {
    const reasoning = "Let me think about this carefully before answering.";
    mock.on({ userMessage: "think", sequenceIndex: 0 }, { content: "42", reasoning }, { chunkSize: 5, truncateAfterChunks: 4, latency: 1 });
    mock.on({ userMessage: "think", sequenceIndex: 1 }, { content: "42", reasoning });

    const { events, error } = await drain(provider.chatStream(ask("think hard"), [], options));

    expect(error).toBeUndefined();
    expect(mock.getRequests()).toHaveLength(2);
    const retryAt = events.findIndex((event) => event.type === "retry");
    expect(retryAt).toBeGreaterThan(0);
    expect([...new Set(events.slice(0, retryAt).map((event) => event.type))]).toEqual(["reasoning"]);
    expect(retriesOf(events)).toHaveLength(1);
    expect(textOf(events)).toBe("42");
  });

  it("does not retry a 400", async () => {
    mock.onMessage("bad", { error: { message: "messages[1].content must be a string", type: "invalid_request_error" }, status: 400 });

    const { events, error } = await drain(provider.chatStream(ask("bad request"), [], options));

    expect(error).toMatchObject({ kind: "client", status: 400, attempts: 1 });
    expect(error?.message).toContain("messages[1].content must be a string");
    expect(mock.getRequests()).toHaveLength(1);
    expect(retriesOf(events)).toEqual([]);
  });
});
