import type OpenAI from "openai";
import type { ChatMessage } from "./types.js";

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/**
 * DeepSeek's thinking mode (and GLM, Qwen) rejects a follow-up turn whose assistant tool-call
 * message lacks the reasoning it streamed; the SDK's types do not know the field.
 */
type AssistantWithReasoning = OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam & { reasoning_content?: string };

export function toWireMessages(messages: ChatMessage[]): WireMessage[] {
  return messages.map((message): WireMessage => {
    switch (message.role) {
      case "system":
        return { role: "system", content: message.content };
      case "user":
        return { role: "user", content: message.content };
      case "tool":
        return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
      case "assistant": {
        const wire: AssistantWithReasoning = { role: "assistant", content: message.content };
        if (message.toolCalls && message.toolCalls.length > 0) {
          wire.tool_calls = message.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.rawArguments },
          }));
        }
        if (message.reasoning && message.reasoning.text !== "") wire.reasoning_content = message.reasoning.text;
        return wire;
      }
    }
  });
}
