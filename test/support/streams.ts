import { expect } from "vitest";
import { LLMError } from "../../src/providers/errors.js";
import type { StreamEvent } from "../../src/providers/types.js";

export async function collect(stream: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const events: StreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** Runs the stream to its failure, keeping what was yielded before it. */
export async function collectFailure(stream: AsyncIterable<StreamEvent>): Promise<{ events: StreamEvent[]; error: LLMError }> {
  const events: StreamEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
  } catch (error) {
    expect(error).toBeInstanceOf(LLMError);
    return { events, error: error as LLMError };
  }
  throw new Error(`the stream ended without the expected error after ${events.length} events`);
}
