import { setTimeout as sleep } from "node:timers/promises";
import { LLMError } from "./errors.js";
import type { ChatMessage, ChatOptions, LLMProvider, StreamEvent, ToolDefinition } from "./types.js";

export interface RetryPolicy {
  /** Requests per LLM call, the first included: 3 means at most 3 requests. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { attempts: 3, baseDelayMs: 1000, maxDelayMs: 60_000 };

/**
 * The wait after failed attempt `attempt` (from 1): exponential backoff, jittered to between half
 * and all of it, unless the other side named its own wait (Retry-After). Also what an MCP server's
 * reconnects wait.
 */
export function backoffMs(policy: RetryPolicy, attempt: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, policy.maxDelayMs);
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/**
 * The one layer that retries LLM calls (the SDKs are built with maxRetries 0). A failed attempt
 * is retried only while no answer text of this call has reached the consumer: text already shown
 * cannot be taken back. A `retry` event tells the consumer to drop what it collected so far.
 */
export function withRetry(provider: LLMProvider, policy: RetryPolicy = defaultRetryPolicy): LLMProvider {
  return {
    name: provider.name,
    async *chatStream(messages: ChatMessage[], tools: ToolDefinition[], options: ChatOptions): AsyncIterable<StreamEvent> {
      for (let attempt = 1; ; attempt++) {
        let textYielded = false;
        try {
          for await (const event of provider.chatStream(messages, tools, options)) {
            if (event.type === "text") textYielded = true;
            yield event;
          }
          return;
        } catch (err) {
          const error = err instanceof LLMError ? err : new LLMError("stream", String(err), { cause: err });
          error.attempts = attempt;
          if (options.signal?.aborted || !error.retryable || textYielded || attempt >= policy.attempts) throw error;
          const delayMs = backoffMs(policy, attempt, error.retryAfterMs);
          yield { type: "retry", attempt, delayMs, error };
          try {
            await sleep(delayMs, undefined, { signal: options.signal });
          } catch {
            throw new LLMError("cancelled", "cancelled while waiting to retry");
          }
        }
      }
    },
  };
}
