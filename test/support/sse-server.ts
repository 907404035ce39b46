/**
 * A loopback `/v1/chat/completions` peer that replays hand-written SSE, for wire shapes aimock
 * cannot produce: fragments without `index`, repeated finish chunks, usage on the finish chunk,
 * malformed JSON, `retry-after-ms`, a stream that stalls until the client hangs up.
 */
import { createServer, type IncomingMessage } from "node:http";
import { listenLoopback } from "./loopback.js";

export interface ScriptedReply {
  /** 200 unless set. */
  status?: number;
  headers?: Record<string, string>;
  /** SSE events written as they are, each followed by a blank line: `data: {...}`, `event: error\ndata: {...}`. */
  events?: string[];
  /** A plain body instead of events, for error responses. */
  body?: string;
  /** After the events: end the response (default), destroy the socket mid-body, or stall until the client leaves. */
  after?: "end" | "drop" | "stall";
}

export interface RecordedRequest {
  path: string;
  body: Record<string, unknown>;
}

export interface SseServer {
  /** Base URL for the OpenAI client, ending in `/v1`. */
  baseURL: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** Request n gets replies[n]; the last reply answers every request after it. */
export async function startSseServer(replies: ScriptedReply[]): Promise<SseServer> {
  if (replies.length === 0) throw new Error("startSseServer needs at least one reply");
  const requests: RecordedRequest[] = [];
  const server = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    requests.push({ path: req.url ?? "", body });
    const reply = replies[Math.min(requests.length, replies.length) - 1]!;
    if (reply.events === undefined) {
      res.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers });
      res.end(reply.body ?? "");
      return;
    }
    res.writeHead(reply.status ?? 200, { "content-type": "text/event-stream", ...reply.headers });
    const text = reply.events.map((event) => `${event}\n\n`).join("");
    const after = reply.after ?? "end";
    if (after === "end") res.end(text);
    // Destroying only after the write has flushed, so the client sees the events, then the break.
    else if (after === "drop") res.write(text, () => res.destroy());
    else res.write(text);
  });
  const port = await listenLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

export const data = (payload: unknown): string => `data: ${JSON.stringify(payload)}`;

export const DONE = "data: [DONE]";

/** One `chat.completion.chunk` event with a single choice. */
export function chunk(delta: Record<string, unknown>, finishReason: string | null = null, extra: Record<string, unknown> = {}): string {
  return data({
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
    ...extra,
  });
}
