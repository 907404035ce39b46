import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLMock } from "@copilotkit/aimock";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { MemoryStore } from "../../src/memory/store.js";
import { OpenAIProvider } from "../../src/providers/openai.js";
import type { ChatMessage } from "../../src/providers/types.js";
import { llmSummarizer, summarizeOverflow } from "../../src/sessions/overflow.js";
import { SessionStore } from "../../src/sessions/store.js";

const user = (text: string): ChatMessage => ({ role: "user", content: text });
const assistant = (text: string): ChatMessage => ({ role: "assistant", content: text });

let stateDir: string;
let workspace: string;
let store: SessionStore;
let memory: MemoryStore;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-overflow-state-"));
  workspace = await mkdtemp(join(tmpdir(), "countd-overflow-ws-"));
  store = new SessionStore(stateDir);
  memory = new MemoryStore(workspace);
});

const memoryLines = async (): Promise<string[]> => {
  try {
    return (await readFile(memory.path, "utf8")).trim().split("\n");
  } catch {
    return [];
  }
};

/** A summariser that records what it was given. */
function recordingSummarizer(answer: string) {
  const calls: ChatMessage[][] = [];
  return { calls, summarize: async (messages: ChatMessage[]) => (calls.push(messages), answer) };
}

describe("summarizeOverflow", () => {
  it("does nothing (no LLM call) while the session is within maxHistory", async () => {
    await store.append("cli", [user("1"), assistant("2"), user("3")]);
    const s = recordingSummarizer("unused");
    expect(await summarizeOverflow({ store, sessionId: "cli", maxHistory: 3, summarize: s.summarize, memory })).toBeNull();
    expect(s.calls).toHaveLength(0);
    expect(await memoryLines()).toEqual([]);
    expect(await store.load("cli")).toHaveLength(3);
  });

  it("summarises the oldest messages into MEMORY.md and drops them, durably", async () => {
    const history = [user("I prefer metric units"), assistant("noted"), user("q2"), assistant("a2"), user("q3")];
    await store.append("cli", history);
    const s = recordingSummarizer("The user prefers metric units.\nThey asked q2.");

    expect(await summarizeOverflow({ store, sessionId: "cli", maxHistory: 2, summarize: s.summarize, memory })).toEqual({
      dropped: 3,
    });
    expect(s.calls).toEqual([history.slice(0, 3)]);
    const lines = await memoryLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d{4}-\d{2}-\d{2}\|auto-overflow\|The user prefers metric units\. They asked q2\.$/);
    expect(await new SessionStore(stateDir).load("cli")).toEqual(history.slice(3));
  });

  describe("never splits a tool call from its results", () => {
    const call = (id: string) => ({ id, name: "read_file", arguments: { path: id }, rawArguments: `{"path":"${id}"}` });
    const history: ChatMessage[] = [
      user("u1"),
      assistant("a1"),
      user("read two files"),
      { role: "assistant", content: null, toolCalls: [call("c1"), call("c2")] },
      { role: "tool", toolCallId: "c1", name: "read_file", content: "one" },
      { role: "tool", toolCallId: "c2", name: "read_file", content: "two" },
      assistant("both read"),
      user("u3"),
    ];

    // maxHistory 4 and 3 put the naive cut before the first and the second tool result.
    it.each([4, 3])("maxHistory %i: the cut moves past the tool results", async (maxHistory) => {
      await store.append("cli", history);
      const s = recordingSummarizer("summary");
      expect(await summarizeOverflow({ store, sessionId: "cli", maxHistory, summarize: s.summarize, memory })).toEqual({
        dropped: 6,
      });
      expect(s.calls[0]).toEqual(history.slice(0, 6));
      expect(await store.load("cli")).toEqual([assistant("both read"), user("u3")]);
    });

    it("maxHistory 5: the call and its results are kept together", async () => {
      await store.append("cli", history);
      const s = recordingSummarizer("summary");
      await summarizeOverflow({ store, sessionId: "cli", maxHistory: 5, summarize: s.summarize, memory });
      expect(await store.load("cli")).toEqual(history.slice(3));
    });
  });

  it("drops nothing when the summariser fails, and the error reaches the caller", async () => {
    const history = [user("1"), assistant("2"), user("3")];
    await store.append("cli", history);
    const summarize = async () => {
      throw new Error("LLM unavailable");
    };
    await expect(summarizeOverflow({ store, sessionId: "cli", maxHistory: 1, summarize, memory })).rejects.toThrow("LLM unavailable");
    expect(await memoryLines()).toEqual([]);
    expect(await new SessionStore(stateDir).load("cli")).toEqual(history);
  });

  it("drops nothing when the summary comes back empty", async () => {
    await store.append("cli", [user("1"), assistant("2"), user("3")]);
    const s = recordingSummarizer("  \n ");
    await expect(summarizeOverflow({ store, sessionId: "cli", maxHistory: 1, summarize: s.summarize, memory })).rejects.toThrow(
      'overflow summary for session "cli" came back empty; 2 old message(s) kept',
    );
    expect(await store.load("cli")).toHaveLength(3);
  });
});

describe("llmSummarizer against an OpenAI-compatible server", () => {
  let mock: LLMock;
  beforeAll(async () => {
    mock = new LLMock({ port: 0, host: "127.0.0.1", chunkSize: 4 });
    mock.onMessage("Summarise this transcript", { content: "The user prefers metric units and asked for a report." });
    mock.onMessage("请总结这段对话记录", { content: "用户喜欢公制单位。" });
    await mock.start();
  });
  afterAll(async () => {
    await mock.stop();
  });
  beforeEach(() => mock.clearRequests());

  const provider = () => new OpenAIProvider({ name: "openai", baseURL: `${mock.url}/v1`, apiKey: "test" });
  const options = { model: "glm-4.7-flash", temperature: 0.7, maxTokens: 4096 };

  it("sends the transcript as plain text without tools and writes the streamed summary to MEMORY.md", async () => {
    const history: ChatMessage[] = [
      user("I prefer metric units"),
      {
        role: "assistant",
        content: "Let me look.",
        toolCalls: [{ id: "c1", name: "read_file", arguments: { path: "big.log" }, rawArguments: '{"path":"big.log"}' }],
      },
      { role: "tool", toolCallId: "c1", name: "read_file", content: "L".repeat(50_000) },
      assistant("done"),
      user("latest"),
    ];
    await store.append("cli", history);
    const summarize = llmSummarizer(provider(), options, "en");

    expect(await summarizeOverflow({ store, sessionId: "cli", maxHistory: 1, summarize, memory })).toEqual({ dropped: 4 });
    expect(await memoryLines()).toEqual([
      expect.stringMatching(/^\d{4}-\d{2}-\d{2}\|auto-overflow\|The user prefers metric units and asked for a report\.$/),
    ]);

    const requests = mock.getRequests();
    expect(requests).toHaveLength(1);
    const body = requests[0]!.body as unknown as { tools?: unknown[]; messages: { role: string; content: string }[] };
    expect(body.tools ?? []).toEqual([]);
    expect(body.messages.map((m) => m.role)).toEqual(["system", "user"]);
    const transcript = body.messages[1]!.content;
    expect(transcript).toContain("user: I prefer metric units");
    expect(transcript).toContain('assistant called tool read_file {"path":"big.log"}');
    expect(transcript).toContain("[…48000 more chars]");
    expect(transcript).not.toContain("latest");
  });

  it("asks in Chinese when the locale is zh", async () => {
    const summarize = llmSummarizer(provider(), options, "zh");
    expect(await summarize([user("我喜欢公制单位")])).toBe("用户喜欢公制单位。");
    const body = mock.getRequests()[0]!.body as unknown as { messages: { content: string }[] };
    expect(body.messages[0]!.content).toContain("长期记忆");
  });
});
