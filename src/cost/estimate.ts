import type { ChatMessage, StreamEvent, ToolDefinition, Usage } from "../providers/types.js";

/*
 * Tokens counted without a tokenizer, for calls whose provider reports no usage and for the
 * worst case a call in flight holds against the caps. The rule is one token per 4 bytes of UTF-8,
 * rounded up: near what BPE tokenizers give for English and JSON, under it for CJK text.
 */

const BYTES_PER_TOKEN = 4;

export const textTokens = (text: string): number => Math.ceil(Buffer.byteLength(text, "utf8") / BYTES_PER_TOKEN);

/** The request as countd holds it, serialised: messages and tool definitions. */
export const requestTokens = (messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): number =>
  textTokens(JSON.stringify(messages)) + textTokens(JSON.stringify(tools));

/** Usage countd estimated: every token of it is marked so. */
export const estimatedUsage = (inputTokens: number, outputTokens: number): Usage => ({
  inputTokens,
  outputTokens,
  cachedInputTokens: 0,
  cacheWriteTokens: 0,
  estimatedTokens: inputTokens + outputTokens,
});

/** What a response said, as it streams: answer and reasoning text, tool names and arguments. */
export class ResponseSize {
  private bytes = 0;

  add(event: StreamEvent): void {
    if (event.type === "text" || event.type === "reasoning") this.bytes += Buffer.byteLength(event.text, "utf8");
    else if (event.type === "tool_call") this.bytes += Buffer.byteLength(event.call.name + event.call.rawArguments, "utf8");
  }

  get tokens(): number {
    return Math.ceil(this.bytes / BYTES_PER_TOKEN);
  }
}
