import { MAX_MESSAGE_BYTES, TOO_LARGE } from "./bounds.js";

type Fetch = typeof fetch;
type RequestId = string | number;

/**
 * The fetch the streamable HTTP transport is given, so that what a server sends is read within
 * bounds the transport itself does not keep. The SDK reads a response body on the transport's
 * own signal, which ends only when the connection closes: a request that timed out or was
 * cancelled would go on reading its answer for as long as the server sends it. Here:
 * - every body is read at most `maxMessageBytes` per message (the whole body, or one
 *   server-sent event), then it fails with TOO_LARGE;
 * - the answer to a request stops being read when the SDK cancels that request (it sends
 *   `notifications/cancelled`, on a timeout or the run's cancel), and in any case after
 *   `maxRequestMs`, the longest any request may wait.
 * Stopping a body closes its connection, so the server sees it.
 */
export function boundedFetch(maxRequestMs: number, maxMessageBytes = MAX_MESSAGE_BYTES, base: Fetch = fetch): Fetch {
  /** How to stop reading the answer of each request in flight, by JSON-RPC id. */
  const inFlight = new Map<RequestId, () => void>();
  return async (url, init = {}) => {
    const sent = messages(init.body);
    for (const message of sent) {
      if (message.method === "notifications/cancelled") inFlight.get(message.params?.requestId as RequestId)?.();
    }
    const ids = sent.filter((message) => message.method !== undefined && message.id !== undefined).map((message) => message.id!);
    const stopper = new AbortController();
    const stop = () => stopper.abort();
    for (const id of ids) inFlight.set(id, stop);
    const deadline = ids.length > 0 ? setTimeout(stop, maxRequestMs) : undefined;
    const done = () => {
      clearTimeout(deadline);
      for (const id of ids) if (inFlight.get(id) === stop) inFlight.delete(id);
    };
    let response: Response;
    try {
      response = await base(url, { ...init, signal: init.signal ? AbortSignal.any([init.signal, stopper.signal]) : stopper.signal });
    } catch (err) {
      done();
      throw err;
    }
    if (!response.body) {
      done();
      return response;
    }
    const sse = (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
    const body = boundedBody(response.body, sse ? sseEventBytes() : wholeBodyBytes(), maxMessageBytes, stopper.signal, done);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

interface Sent {
  method?: string;
  id?: RequestId;
  params?: { requestId?: unknown };
}

/** The JSON-RPC messages of a request body the SDK wrote (one, or a batch); none for a GET. */
function messages(body: RequestInit["body"]): Sent[] {
  if (typeof body !== "string") return [];
  try {
    const parsed = JSON.parse(body) as Sent | Sent[];
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    return [];
  }
}

/** Counts a chunk's bytes toward the current message; returns its size so far. */
type MessageBytes = (chunk: Uint8Array) => number;

function wholeBodyBytes(): MessageBytes {
  let total = 0;
  return (chunk) => (total += chunk.byteLength);
}

const LF = 0x0a;
const CR = 0x0d;

/** The bytes of the event being received: a blank line (LF, CR or CRLF endings) ends one. */
function sseEventBytes(): MessageBytes {
  let event = 0;
  let line = 0;
  let afterCR = false;
  return (chunk) => {
    let largest = event;
    for (const byte of chunk) {
      if (byte === LF && afterCR) {
        afterCR = false;
        continue;
      }
      afterCR = byte === CR;
      if (byte === LF || byte === CR) {
        if (line === 0) event = 0;
        line = 0;
      } else {
        line++;
        event++;
        largest = Math.max(largest, event);
      }
    }
    return largest;
  };
}

/**
 * `source` passed on as it is read, until a message grows past `max` (the stream fails with
 * TOO_LARGE) or `stop` aborts (the stream ends where it is: the SDK's reader sees an answer
 * cut short, not a broken connection). Either way `source` is cancelled, which closes the socket.
 */
function boundedBody(
  source: ReadableStream<Uint8Array>,
  count: MessageBytes,
  max: number,
  stop: AbortSignal,
  done: () => void,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let finished = false;
  const finish = () => {
    if (finished) return false;
    finished = true;
    done();
    void reader.cancel().catch(() => {});
    return true;
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const stopped = () => finish() && controller.close();
      if (stop.aborted) stopped();
      else stop.addEventListener("abort", stopped, { once: true });
    },
    async pull(controller) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (err) {
        if (finish()) controller.error(err);
        return;
      }
      if (finished) return;
      if (read.done) {
        finish();
        controller.close();
      } else if (count(read.value) > max) {
        finish();
        controller.error(new Error(`the MCP server ${TOO_LARGE}`));
      } else {
        controller.enqueue(read.value);
      }
    },
    cancel() {
      finish();
    },
  });
}
