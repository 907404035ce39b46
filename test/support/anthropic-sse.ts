import { createServer, type Server } from "node:http";
import { listenLoopback } from "./loopback.js";

/**
 * A scripted Anthropic Messages endpoint on loopback, for what aimock cannot do: it keeps each raw
 * request body (aimock journals only its OpenAI-normalised form, without cache_control, images,
 * thinking blocks or is_error), and it sends exactly the SSE frames a test scripts, including ones
 * aimock never produces (invalid tool JSON, cache usage, error events, malformed frames).
 */
export type ScriptedReply =
  /** Each object is sent as `event: <type>` + `data: <json>`; a string is written verbatim. */
  { sse: Array<Record<string, unknown> | string>; end?: "close" | "drop" } | { status: number; json: unknown };

export interface AnthropicSSEServer {
  url: string;
  /** Parsed JSON bodies of every POST /v1/messages, in arrival order. */
  bodies: Array<Record<string, unknown>>;
  /** Queues replies, served one per request in order. */
  reply(...replies: ScriptedReply[]): void;
  close(): Promise<void>;
}

export async function startAnthropicSSE(): Promise<AnthropicSSEServer> {
  const bodies: Array<Record<string, unknown>> = [];
  const queue: ScriptedReply[] = [];
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (raw += chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/messages") {
        res.writeHead(404).end(`no route for ${req.method} ${req.url}`);
        return;
      }
      bodies.push(JSON.parse(raw) as Record<string, unknown>);
      const next = queue.shift();
      if (!next) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: "test scripted no reply" } }));
      } else if ("status" in next) {
        res.writeHead(next.status, { "content-type": "application/json" }).end(JSON.stringify(next.json));
      } else {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        for (const frame of next.sse) {
          res.write(typeof frame === "string" ? frame : `event: ${String(frame.type)}\ndata: ${JSON.stringify(frame)}\n\n`);
        }
        if (next.end === "drop") res.destroy();
        else res.end();
      }
    });
  });
  const port = await listenLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    reply: (...replies) => queue.push(...replies),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
