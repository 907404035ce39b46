import type { CountdEvents } from "../events.js";
import { LLMError } from "../providers/errors.js";
import {
  addCost,
  addUsage,
  emptyUsage,
  type FinishReason,
  type Reasoning,
  type StreamEvent,
  type ThinkingBlock,
  type ToolCall,
  type Usage,
} from "../providers/types.js";
import { errorText } from "../text.js";

/** One iteration of the loop: what its LLM call produced, collected event by event from the provider's stream. */
export class Iteration {
  text = "";
  calls: ToolCall[] = [];
  readonly usage: Usage = emptyUsage();
  /** USD; null when the model has no price or the provider is not metered. */
  cost: number | null;
  finishReason: FinishReason | undefined;
  /** Requests this call took, counting those the retry layer repeated. */
  attempts = 1;
  private reasoningText = "";
  private blocks: ThinkingBlock[] = [];
  private error: unknown;

  /** `unpriced`: a call cut off before its usage was reported must not show as $0. */
  constructor(unpriced = false) {
    this.cost = unpriced ? null : 0;
  }

  /** Takes one event; returns the answer text it carries, if any, for the caller to stream on. */
  accept(event: StreamEvent): string | undefined {
    switch (event.type) {
      case "text":
        this.text += event.text;
        return event.text;
      case "reasoning":
        this.reasoningText += event.text;
        return undefined;
      case "thinking_block":
        this.blocks.push(event.block);
        return undefined;
      case "tool_call":
        this.calls.push(event.call);
        return undefined;
      case "usage":
        addUsage(this.usage, event.usage);
        this.cost = addCost(this.cost, event.cost);
        return undefined;
      case "finish":
        this.finishReason = event.reason;
        return undefined;
      case "retry":
        // The failed attempt showed no answer text (or it would not be retried); what else it
        // produced belongs to a response that no longer counts.
        this.attempts = event.attempt + 1;
        this.reasoningText = "";
        this.blocks = [];
        this.calls = [];
        return undefined;
    }
  }

  get reasoning(): Reasoning | undefined {
    if (!this.reasoningText && this.blocks.length === 0) return undefined;
    return { text: this.reasoningText, ...(this.blocks.length > 0 ? { blocks: this.blocks } : {}) };
  }

  /** Records why the call failed; the retry layer has already counted its attempts. */
  fail(error: unknown): void {
    this.error = error;
    if (error instanceof LLMError) this.attempts = error.attempts;
  }

  /** The audit record of this call. */
  report(sessionId: string, model: string, durationMs: number, cancelled: boolean): CountdEvents["llm.finished"] {
    const failed = this.error !== undefined;
    return {
      sessionId,
      model,
      usage: this.usage,
      cost: this.cost,
      durationMs,
      finishReason: failed ? "error" : cancelled ? "cancelled" : (this.finishReason ?? "other"),
      attempts: this.attempts,
      ...(failed ? { error: errorText(this.error) } : {}),
    };
  }
}
