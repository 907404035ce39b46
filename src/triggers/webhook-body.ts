import type { BodyHold } from "./webhook-budget.js";

/**
 * A request body read whole, "too large" as soon as it passes `max` bytes, or "busy" when the bytes
 * held for all unchecked requests would pass their total: a chunked body has no Content-Length to
 * refuse it by, and must not be held in memory past the limit. What is past the limit is left
 * unread (not destroyed), so the refusal can still be answered on the connection.
 */
export async function readBounded(
  body: AsyncIterable<Uint8Array>,
  max: number,
  hold: BodyHold,
): Promise<Uint8Array | "too large" | "busy"> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const reader = body[Symbol.asyncIterator]();
  for (;;) {
    const { done, value } = await reader.next();
    if (done) break;
    length += value.byteLength;
    if (length > max) return "too large";
    if (!hold.take(value.byteLength)) return "busy";
    chunks.push(value);
  }
  return Buffer.concat(chunks, length);
}
