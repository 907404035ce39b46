/**
 * The one shape every provider speaks. Messages are kept in an OpenAI-like form (the design's
 * native form); the Anthropic provider converts on the way out and on the way in.
 */

export type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

/** A tool call as the loop sees it: arguments parsed, or null with the raw text kept when not valid JSON. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown> | null;
  rawArguments: string;
}

/** An Anthropic thinking block, kept byte for byte so it can be sent back with its signature. */
export type ThinkingBlock = { type: "thinking"; thinking: string; signature: string } | { type: "redacted_thinking"; data: string };

/** Reasoning the provider returned beside the answer; never shown as answer text. */
export interface Reasoning {
  text: string;
  blocks?: ThinkingBlock[];
}

export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | ContentPart[] }
  | { role: "assistant"; content: string | null; toolCalls?: ToolCall[]; reasoning?: Reasoning }
  | { role: "tool"; toolCallId: string; name: string; content: string; isError?: boolean };

export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/**
 * Tokens of one call or a sum of calls. inputTokens counts every input token, the cached ones and
 * those written to the cache included (as OpenAI's prompt_tokens does; the Anthropic provider adds
 * its parts up to match), so the price of each part can be told apart (cost/prices.ts).
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input read from the provider's prompt cache. */
  cachedInputTokens: number;
  /** Input written to the provider's prompt cache (Anthropic's cache_creation_input_tokens). */
  cacheWriteTokens: number;
  /**
   * How many of these tokens countd estimated because the provider reported no usage
   * (cost/estimate.ts); absent when every figure is the provider's own.
   */
  estimatedTokens?: number;
}

export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter" | "other";

export type StreamEvent =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "thinking_block"; block: ThinkingBlock }
  | { type: "tool_call"; call: ToolCall }
  /** `cost`: USD, null when the model has no price; set by the metering layer (cost/metered.ts). */
  | { type: "usage"; usage: Usage; cost?: number | null }
  | { type: "finish"; reason: FinishReason; raw: string }
  /**
   * Emitted by the retry layer when an attempt failed before any answer text: whatever the
   * consumer collected from that attempt (reasoning, tool calls, usage) must be discarded.
   */
  | { type: "retry"; attempt: number; delayMs: number; error: Error };

/**
 * A call whose answer must be one JSON object valid against `schema`, asked through the
 * provider's structured-output mode: OpenAI's `response_format: json_schema`, Anthropic's
 * tool-forced output (a tool named `name` whose input is the answer, streamed back as text).
 */
export interface AnswerFormat {
  name: string;
  schema: Record<string, unknown>;
}

export interface ChatOptions {
  model: string;
  temperature: number;
  maxTokens: number;
  signal?: AbortSignal;
  answer?: AnswerFormat;
}

export interface LLMProvider {
  /** Preset or kind name, for logs: "openai", "deepseek", "anthropic", … */
  readonly name: string;
  chatStream(messages: ChatMessage[], tools: ToolDefinition[], options: ChatOptions): AsyncIterable<StreamEvent>;
}

export const emptyUsage = (): Usage => ({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 });

export function addUsage(into: Usage, more: Usage): Usage {
  into.inputTokens += more.inputTokens;
  into.outputTokens += more.outputTokens;
  into.cachedInputTokens += more.cachedInputTokens;
  into.cacheWriteTokens += more.cacheWriteTokens;
  if (more.estimatedTokens) into.estimatedTokens = (into.estimatedTokens ?? 0) + more.estimatedTokens;
  return into;
}

/** Two costs in USD together: unknown (null, an unpriced call) once either is, never counted as 0. */
export function addCost(a: number | null, b: number | null | undefined): number | null {
  return a === null || b == null ? null : a + b;
}

/** Parses streamed tool-call arguments; an empty string means "no arguments". */
export function parseToolArguments(raw: string): Record<string, unknown> | null {
  if (raw.trim() === "") return {};
  try {
    const value: unknown = JSON.parse(raw);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
