import { createServer, type IncomingHttpHeaders } from "node:http";
import { Webhook } from "standardwebhooks";
import { closeServer, listenLoopback } from "./loopback.js";

/** An HTTP status (answered with an empty body), a full answer, or "hang": never answer. */
export type ReceiverStep = number | { status: number; headers?: Record<string, string>; body?: string } | "hang";

export interface ReceivedRequest {
  method: string;
  /** Path and query, as requested. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The status answered; undefined while hanging. */
  status?: number;
  /** With a secret: whether the Standard Webhooks signature verified. */
  verified?: boolean;
}

export interface WebhookReceiver {
  url: string;
  requests: ReceivedRequest[];
  /** Steps for the next requests; once they are used up every request is answered 200. */
  script(...steps: ReceiverStep[]): void;
  /** webhook-id of every request answered 2xx, in order: a duplicate shows up twice. */
  acknowledgedIds(): string[];
  /** Resolves once `count` requests have arrived in total. */
  waitFor(count: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A webhook receiver on 127.0.0.1. With `secret`, every request is verified with the
 * standardwebhooks package as a real receiver would; a request that fails is answered 401
 * without using up a step.
 */
export async function startWebhookReceiver(opts: { secret?: string; steps?: ReceiverStep[] } = {}): Promise<WebhookReceiver> {
  const queue: ReceiverStep[] = [...(opts.steps ?? [])];
  const requests: ReceivedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const verifier = opts.secret ? new Webhook(opts.secret) : undefined;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const request: ReceivedRequest = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
      requests.push(request);
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      if (verifier) {
        try {
          verifier.verify(body, req.headers as Record<string, string>);
          request.verified = true;
        } catch {
          request.verified = false;
          request.status = 401;
          res.writeHead(401).end("invalid signature");
          return;
        }
      }
      const step = queue.shift() ?? 200;
      if (step === "hang") return;
      const answer = typeof step === "number" ? { status: step } : step;
      request.status = answer.status;
      res.writeHead(answer.status, answer.headers).end(answer.body ?? "");
    });
  });
  const port = await listenLoopback(server);

  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    script: (...steps) => queue.push(...steps),
    acknowledgedIds: () =>
      requests.filter((r) => r.status !== undefined && r.status >= 200 && r.status < 300).map((r) => String(r.headers["webhook-id"])),
    waitFor: (count) => (requests.length >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }))),
    close: async () => {
      await closeServer(server);
    },
  };
}
