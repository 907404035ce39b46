/**
 * A request body read whole, or "too large" as soon as it passes `max` bytes: a chunked body has no
 * Content-Length to refuse it by, and must not be held in memory past the limit.
 */
export async function readBounded(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | "too large"> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > max) {
      await reader.cancel().catch(() => undefined);
      return "too large";
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, length);
}
