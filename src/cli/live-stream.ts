import { connect } from "node:net";
import WebSocket from "ws";
import type { LiveMessage, Subscription } from "../console/protocol.js";

/** Where the daemon answers: its control socket, or its console's address and token. */
export type Endpoint = { socket: string } | { url: URL; token: string };

export interface LiveStream {
  /** Resolves when the stream ends: closed here, or the daemon went away (the close's code and reason). */
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

/** The daemon's live stream narrowed by `filter`, open once its replay is over (`live` received). */
export function openLive(
  endpoint: Endpoint,
  filter: Omit<Subscription, "type">,
  onMessage: (message: LiveMessage) => void,
): Promise<LiveStream> {
  const query = new URLSearchParams(
    Object.entries(filter).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  ).toString();
  const path = `/api/ws${query ? `?${query}` : ""}`;
  const ws =
    "socket" in endpoint
      ? // Not a ws+unix: URL, which would keep a space in the state directory's path percent-encoded.
        new WebSocket(`ws://localhost${path}`, { createConnection: () => connect(endpoint.socket) })
      : new WebSocket(new URL(path, endpoint.url.href.replace(/^http/, "ws")), { headers: { authorization: `Bearer ${endpoint.token}` } });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return new Promise((resolve, reject) => {
    ws.on("error", reject);
    ws.on("message", (data) => {
      const message = JSON.parse(data.toString()) as LiveMessage;
      if (message.type === "live") resolve({ closed, close: () => ws.close() });
      else if (message.type !== "replay") onMessage(message);
    });
    // Closed before `live`: the daemon stopped while the stream opened.
    void closed.then(({ code, reason }) => reject(new Error(`the daemon closed the live stream (${code}${reason ? `: ${reason}` : ""})`)));
  });
}
