import type * as AnthropicSdk from "@anthropic-ai/sdk";
import type Anthropic from "@anthropic-ai/sdk";
import type { MessageCreateParamsStreaming, RawMessageStreamEvent, StopReason, Tool } from "@anthropic-ai/sdk/resources/messages";
import { toAnthropicConversation, toAnthropicTool } from "./anthropic-messages.js";
import { httpError, LLMError } from "./errors.js";
import {
  parseToolArguments,
  type AnswerFormat,
  type ChatMessage,
  type ChatOptions,
  type FinishReason,
  type LLMProvider,
  type StreamEvent,
  type ToolDefinition,
} from "./types.js";
import { errorText } from "../text.js";

export interface AnthropicProviderOptions {
  baseURL?: string;
  apiKey: string;
  timeoutMs?: number;
  /** Turns extended thinking on with this many thinking tokens; must stay below maxTokens. */
  thinkingBudget?: number;
}

/** A content block between its start and stop event, collecting its deltas. */
type OpenBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; json: string }
  | { type: "other" };

type Sdk = typeof AnthropicSdk;

export class AnthropicProvider implements LLMProvider {
  readonly name = "anthropic";
  private readonly options: AnthropicProviderOptions;
  private readonly thinkingBudget: number | undefined;
  /** The SDK takes ~200 ms to load, so the first request loads it rather than start-up. */
  private connection: Promise<{ sdk: Sdk; client: Anthropic }> | undefined;

  constructor(options: AnthropicProviderOptions) {
    this.options = options;
    this.thinkingBudget = options.thinkingBudget;
  }

  private connect(): Promise<{ sdk: Sdk; client: Anthropic }> {
    this.connection ??= import("@anthropic-ai/sdk").then((sdk) => {
      const { apiKey, baseURL, timeoutMs } = this.options;
      // maxRetries 0: src/providers/retry.ts is the one retry layer.
      const client = new sdk.default({ apiKey, baseURL, timeout: timeoutMs, maxRetries: 0 });
      return { sdk, client };
    });
    return this.connection;
  }

  async *chatStream(messages: ChatMessage[], tools: ToolDefinition[], options: ChatOptions): AsyncIterable<StreamEvent> {
    const { system, messages: turns } = toAnthropicConversation(messages);
    // options.temperature is not sent: API version 2026-10-21, which this SDK speaks, rejects any
    // sampling parameter (temperature, top_p, top_k) with a 400, and the SDK no longer types them.
    const params: MessageCreateParamsStreaming = {
      model: options.model,
      max_tokens: options.maxTokens,
      messages: turns,
      stream: true,
      ...(system.length > 0 && { system }),
      ...(tools.length > 0 && { tools: tools.map(toAnthropicTool) }),
      ...(options.answer && answerParams(options.answer, tools)),
      ...this.thinkingParams(options.maxTokens),
    };
    const { sdk, client } = await this.connect();
    let stream: AsyncIterable<RawMessageStreamEvent>;
    try {
      stream = await client.messages.create(params, { signal: options.signal });
    } catch (err) {
      throw requestError(sdk, client, err, options.signal);
    }
    yield* readStream(sdk, stream, options.signal, options.answer?.name);
  }

  private thinkingParams(maxTokens: number): Pick<MessageCreateParamsStreaming, "thinking"> {
    if (this.thinkingBudget === undefined) return {};
    if (this.thinkingBudget >= maxTokens) {
      throw new LLMError(
        "client",
        `thinkingBudget (${this.thinkingBudget}) must be less than maxTokens (${maxTokens}): thinking tokens count toward maxTokens`,
      );
    }
    return { thinking: { type: "enabled", budget_tokens: this.thinkingBudget } };
  }
}

function requestError(sdk: Sdk, client: Anthropic, err: unknown, signal: AbortSignal | undefined): LLMError {
  if (err instanceof sdk.APIUserAbortError || signal?.aborted) {
    return new LLMError("cancelled", "Anthropic request cancelled", { cause: err });
  }
  if (err instanceof sdk.APIConnectionError) {
    return new LLMError("connection", `cannot reach the Anthropic API at ${client.baseURL}: ${err.message}`, {
      cause: err,
    });
  }
  if (err instanceof sdk.APIError && err.status !== undefined) {
    return httpError(err.status, err.apiMessage ?? err.message, err.headers, err);
  }
  return new LLMError("client", `Anthropic request failed: ${String(err)}`, { cause: err });
}

/**
 * Tool-forced output: the answer is the input of a call to a tool of its own. Alone, that tool is
 * forced; beside the job's tools the model must call one of them each turn (`any`), one at a time,
 * so it works with its tools and then calls the answer tool, which ends the loop.
 */
function answerParams(answer: AnswerFormat, tools: ToolDefinition[]): Pick<MessageCreateParamsStreaming, "tools" | "tool_choice"> {
  const tool = {
    name: answer.name,
    description: "Give your final answer: its input is the answer.",
    input_schema: answer.schema as Tool.InputSchema,
  };
  return {
    tools: [...tools.map(toAnthropicTool), tool],
    tool_choice: tools.length === 0 ? { type: "tool", name: answer.name } : { type: "any", disable_parallel_tool_use: true },
  };
}

/** `answerTool`: the call of this tool is the answer, passed on as text (the JSON of its input). */
async function* readStream(
  sdk: Sdk,
  stream: AsyncIterable<RawMessageStreamEvent>,
  signal: AbortSignal | undefined,
  answerTool?: string,
): AsyncGenerator<StreamEvent> {
  const open = new Map<number, OpenBlock>();
  let inputTokens = 0;
  let cacheReadTokens = 0;
  let cacheCreationTokens = 0;
  let outputTokens = 0;
  let stopReason: StopReason | null = null;
  let stopped = false;
  try {
    for await (const event of stream) {
      switch (event.type) {
        case "message_start": {
          const usage = event.message.usage;
          inputTokens = usage.input_tokens;
          cacheReadTokens = usage.cache_read_input_tokens ?? 0;
          cacheCreationTokens = usage.cache_creation_input_tokens ?? 0;
          outputTokens = usage.output_tokens;
          break;
        }
        case "content_block_start": {
          const block = event.content_block;
          if (block.type === "thinking") {
            open.set(event.index, { type: "thinking", thinking: block.thinking, signature: block.signature });
          } else if (block.type === "tool_use") {
            open.set(event.index, { type: "tool_use", id: block.id, name: block.name, json: "" });
          } else {
            open.set(event.index, { type: "other" });
            // A redacted block arrives whole on its start event, with no deltas.
            if (block.type === "redacted_thinking") {
              yield { type: "thinking_block", block: { type: "redacted_thinking", data: block.data } };
            } else if (block.type === "text" && block.text !== "") {
              yield { type: "text", text: block.text };
            }
          }
          break;
        }
        case "content_block_delta": {
          const block = open.get(event.index);
          const delta = event.delta;
          if (delta.type === "text_delta") {
            if (delta.text !== "") yield { type: "text", text: delta.text };
          } else if (delta.type === "thinking_delta") {
            if (block?.type === "thinking") block.thinking += delta.thinking;
            yield { type: "reasoning", text: delta.thinking };
          } else if (delta.type === "signature_delta") {
            if (block?.type === "thinking") block.signature += delta.signature;
          } else if (delta.type === "input_json_delta") {
            if (block?.type === "tool_use") block.json += delta.partial_json;
          }
          break;
        }
        case "content_block_stop": {
          const block = open.get(event.index);
          open.delete(event.index);
          if (block?.type === "thinking") {
            yield { type: "thinking_block", block: { type: "thinking", thinking: block.thinking, signature: block.signature } };
          } else if (block?.type === "tool_use" && block.name === answerTool) {
            yield { type: "text", text: block.json };
          } else if (block?.type === "tool_use") {
            const call = { id: block.id, name: block.name, arguments: parseToolArguments(block.json), rawArguments: block.json };
            yield { type: "tool_call", call };
          }
          break;
        }
        case "message_delta": {
          // message_delta usage is cumulative and, where present, supersedes message_start's.
          const usage = event.usage;
          inputTokens = usage.input_tokens ?? inputTokens;
          cacheReadTokens = usage.cache_read_input_tokens ?? cacheReadTokens;
          cacheCreationTokens = usage.cache_creation_input_tokens ?? cacheCreationTokens;
          outputTokens = usage.output_tokens;
          stopReason = event.delta.stop_reason ?? stopReason;
          break;
        }
        case "message_stop":
          stopped = true;
          break;
      }
    }
  } catch (err) {
    throw streamError(sdk, err);
  }
  // The SDK ends the iteration quietly when the request is aborted, and a server that closes the
  // connection cleanly mid-answer looks the same: only message_stop marks a complete answer.
  if (!stopped) {
    if (signal?.aborted) throw new LLMError("cancelled", "Anthropic stream cancelled");
    throw new LLMError("stream", "Anthropic stream ended before message_stop: the answer is incomplete");
  }
  yield {
    type: "usage",
    usage: {
      inputTokens: inputTokens + cacheReadTokens + cacheCreationTokens,
      cachedInputTokens: cacheReadTokens,
      cacheWriteTokens: cacheCreationTokens,
      outputTokens,
    },
  };
  yield { type: "finish", reason: finishReason(stopReason), raw: stopReason ?? "" };
}

function streamError(sdk: Sdk, err: unknown): LLMError {
  // An `error` event inside the stream, e.g. overloaded_error.
  if (err instanceof sdk.APIError && err.status === undefined && err.type !== null) {
    return new LLMError("stream", `Anthropic stream sent an error event: ${err.type}: ${err.apiMessage ?? err.message}`, {
      cause: err,
    });
  }
  return new LLMError("stream", `Anthropic stream broke after the response began: ${errorText(err)}`, { cause: err });
}

function finishReason(stopReason: StopReason | null): FinishReason {
  switch (stopReason) {
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "tool_use":
      return "tool_calls";
    case "max_tokens":
      return "length";
    case "refusal":
      return "content_filter";
    default:
      return "other";
  }
}
