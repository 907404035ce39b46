import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebhookTrigger } from "../triggers/webhook.js";
import type { Guard } from "./guard.js";

const HOOK_PATH = /^\/hooks\/([^/?]+)(?:\?.*)?$/;

/** The job a POST to /hooks/<job> names; undefined for any other request. */
export function hookJob(req: IncomingMessage): string | undefined {
  if (req.method !== "POST") return undefined;
  const name = HOOK_PATH.exec(req.url ?? "")?.[1];
  if (name === undefined) return undefined;
  try {
    return decodeURIComponent(name);
  } catch {
    return undefined;
  }
}

/**
 * POST /hooks/<job>: the one endpoint that takes no console token, since the request's Standard
 * Webhooks signature is its credential; the trigger decides, this only carries the request over.
 * Served from Node's own request, not through the app: a flood of forged requests is refused at
 * the least cost to the event loop the daemon's timers share (the fetch-API objects the app's
 * adapter builds for each request were a third of a refusal's cost).
 */
export async function serveHook(
  req: IncomingMessage,
  res: ServerResponse,
  job: string,
  guard: Guard,
  hooks: WebhookTrigger,
): Promise<void> {
  const headers = { "Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" };
  if (!guard.hostAllowed(req.headers.host)) {
    res
      .writeHead(403, headers)
      .end(JSON.stringify({ error: "this Host is not the console's: open it by the address countd console prints" }));
    return;
  }
  const answer = await hooks.handle({ job, header: (name) => headerText(req.headers[name]), body: req }).catch((err: unknown) => ({
    status: 500 as const,
    body: { error: `countd could not answer: ${err instanceof Error ? err.message : String(err)}` },
    headers: {},
  }));
  // A body left unread past max_body: the connection is not reused.
  if (!req.complete) res.setHeader("Connection", "close");
  res.writeHead(answer.status, { ...headers, ...answer.headers }).end(JSON.stringify(answer.body));
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}
