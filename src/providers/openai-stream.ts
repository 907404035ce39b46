import { randomUUID } from "node:crypto";
import { LLMError } from "./errors.js";
import { parseToolArguments, type FinishReason, type StreamEvent, type Usage } from "./types.js";

/**
 * A streamed chunk as OpenAI-compatible servers really send it: the SDK's types lack the
 * reasoning fields (DeepSeek, GLM, Qwen, OpenRouter) and DeepSeek's cache counter, and some
 * servers omit a tool-call fragment's `index`.
 */
export interface WireChunk {
  choices?: Array<{ delta?: WireDelta | null; finish_reason?: string | null }>;
  usage?: WireUsage | null;
}

interface WireDelta {
  content?: string | null;
  reasoning_content?: string | null;
  reasoning?: string | null;
  tool_calls?: ToolCallFragment[] | null;
}

interface ToolCallFragment {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** cache_write_tokens: OpenRouter's, for models whose cache is written at a price. */
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  prompt_cache_hit_tokens?: number;
}

interface PartialCall {
  id: string;
  name: string;
  rawArguments: string;
}

const KNOWN_FINISH_REASONS: ReadonlySet<string> = new Set(["stop", "tool_calls", "length", "content_filter"]);

/**
 * Turns one response's chunks into StreamEvents. Text and reasoning pass through at once; tool
 * calls, usage and the finish reason are held until the stream ends, so a server that repeats
 * its finish chunk or puts usage on it still yields each of them once.
 */
export class ChunkAssembler {
  private readonly calls: PartialCall[] = [];
  private readonly callsByIndex = new Map<number, PartialCall>();
  private lastCall: PartialCall | undefined;
  private usage: Usage | undefined;
  private finishRaw: string | undefined;

  /** `where` names the provider, endpoint and model in the error a truncated stream raises. */
  constructor(private readonly where: string) {}

  *accept(chunk: WireChunk): Generator<StreamEvent> {
    if (chunk.usage) this.usage = mapUsage(chunk.usage);
    const choice = chunk.choices?.[0];
    if (!choice) return;
    const delta = choice.delta ?? {};
    // OpenRouter may mirror the same text in both fields; one of them is the reasoning.
    const reasoning = delta.reasoning_content || delta.reasoning;
    if (reasoning) yield { type: "reasoning", text: reasoning };
    if (delta.content) yield { type: "text", text: delta.content };
    for (const fragment of delta.tool_calls ?? []) this.addFragment(fragment);
    if (choice.finish_reason && this.finishRaw === undefined) this.finishRaw = choice.finish_reason;
  }

  /** Call once the stream has ended; a stream that ended without a finish reason was cut short. */
  *end(): Generator<StreamEvent> {
    const raw = this.finishRaw;
    if (raw === undefined) throw new LLMError("stream", `the stream ended before a finish_reason (${this.where})`);
    for (const call of this.calls) {
      yield {
        type: "tool_call",
        call: {
          // The tool result must name the call it answers; a few local servers send no id.
          id: call.id || `call_${randomUUID()}`,
          name: call.name,
          arguments: parseToolArguments(call.rawArguments),
          rawArguments: call.rawArguments,
        },
      };
    }
    if (this.usage) yield { type: "usage", usage: this.usage };
    yield { type: "finish", reason: KNOWN_FINISH_REASONS.has(raw) ? (raw as FinishReason) : "other", raw };
  }

  private addFragment(fragment: ToolCallFragment): void {
    // Without an index, a fragment continues the call before it.
    let call = fragment.index === undefined ? this.lastCall : this.callsByIndex.get(fragment.index);
    // A different id starts a new call, also where a server reuses index 0 for every call.
    if (call && fragment.id && call.id && fragment.id !== call.id) call = undefined;
    if (!call) {
      call = { id: "", name: "", rawArguments: "" };
      this.calls.push(call);
    }
    if (fragment.index !== undefined) this.callsByIndex.set(fragment.index, call);
    this.lastCall = call;
    if (fragment.id) call.id = fragment.id;
    if (fragment.function?.name) call.name = fragment.function.name;
    call.rawArguments += fragment.function?.arguments ?? "";
  }
}

function mapUsage(usage: WireUsage): Usage {
  return {
    inputTokens: usage.prompt_tokens ?? 0,
    outputTokens: usage.completion_tokens ?? 0,
    cachedInputTokens: usage.prompt_tokens_details?.cached_tokens ?? usage.prompt_cache_hit_tokens ?? 0,
    cacheWriteTokens: usage.prompt_tokens_details?.cache_write_tokens ?? 0,
  };
}
