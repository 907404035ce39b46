/**
 * A request body read whole, or "too large" as soon as it passes `max` bytes: a chunked body has no
 * Content-Length to refuse it by, and must not be held in memory past the limit. What is past the
 * limit is left unread (not destroyed), so the refusal can still be answered on the connection.
 */
export async function readBounded(body: AsyncIterable<Uint8Array>, max: number): Promise<Uint8Array | "too large"> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const reader = body[Symbol.asyncIterator]();
  for (;;) {
    const { done, value } = await reader.next();
    if (done) break;
    length += value.byteLength;
    if (length > max) return "too large";
    chunks.push(value);
  }
  return Buffer.concat(chunks, length);
}
