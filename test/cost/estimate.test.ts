import { describe, expect, it } from "vitest";
import { requestTokens, textTokens } from "../../src/cost/estimate.js";
import type { ChatMessage, ToolDefinition } from "../../src/providers/types.js";

const tools: ToolDefinition[] = [
  { type: "function", function: { name: "lookup", description: "Looks a service up.", parameters: { type: "object", properties: {} } } },
];

describe("requestTokens", () => {
  it("counts a conversation as its JSON, also as it grows call by call", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "You are countd. Zeit: 09:00 — 東京" },
      { role: "user", content: 'Check "disk" and say\nhow full it is.' },
    ];
    const serialised = () => textTokens(JSON.stringify(messages)) + textTokens(JSON.stringify(tools));
    expect(requestTokens(messages, tools)).toBe(serialised());
    messages.push({
      role: "assistant",
      content: null,
      toolCalls: [{ id: "call_1", name: "lookup", arguments: { step: 1 }, rawArguments: '{"step":1}' }],
    });
    messages.push({ role: "tool", toolCallId: "call_1", name: "lookup", content: "disk 61 % ✓" });
    expect(requestTokens(messages, tools)).toBe(serialised());
    expect(requestTokens([], [])).toBe(textTokens("[]") * 2);
  });
});
