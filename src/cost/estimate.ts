import type { ChatMessage, StreamEvent, ToolDefinition, Usage } from "../providers/types.js";

/*
 * Tokens counted without a tokenizer, for calls whose provider reports no usage and for the
 * worst case a call in flight holds against the caps. The rule is one token per 4 bytes of UTF-8,
 * rounded up: near what BPE tokenizers give for English and JSON, under it for CJK text.
 */

const BYTES_PER_TOKEN = 4;

export const textTokens = (text: string): number => Math.ceil(Buffer.byteLength(text, "utf8") / BYTES_PER_TOKEN);

/** UTF-8 bytes of each message and tool list serialised, once: a run's calls resend the messages before. */
const serialisedBytes = new WeakMap<object, number>();

function bytesOf(value: object): number {
  let bytes = serialisedBytes.get(value);
  if (bytes === undefined) serialisedBytes.set(value, (bytes = Buffer.byteLength(JSON.stringify(value), "utf8")));
  return bytes;
}

/**
 * The request as countd holds it, serialised: messages and tool definitions. The messages' array
 * is counted as JSON.stringify writes it (brackets, a comma between two), from each message's
 * own size, so a call of a long run does not serialise the whole conversation again.
 */
export function requestTokens(messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): number {
  let bytes = 2 + Math.max(messages.length - 1, 0);
  for (const message of messages) bytes += bytesOf(message);
  return Math.ceil(bytes / BYTES_PER_TOKEN) + Math.ceil(bytesOf(tools) / BYTES_PER_TOKEN);
}

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
