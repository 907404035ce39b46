/**
 * The senders of bench/console-webhook.ts, in a process of their own so that their work does not
 * share the daemon's event loop: signed POSTs to /hooks/<job> over keep-alive connections, either
 * as fast as `concurrency` clients go or paced at `perSecond`.
 */
import { randomUUID } from "node:crypto";
import { Agent, request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { Webhook } from "standardwebhooks";

export type ToSenders =
  | { type: "send"; url: string; secret: string; valid: boolean; concurrency: number; seconds: number; perSecond?: number }
  | { type: "stop" };
export type FromSenders = { type: "sent"; statuses: Record<string, number>; seconds: number } | { type: "error"; message: string };

const BODY = JSON.stringify({ type: "order.created", data: { id: 1042, total: "19.99" } });

function post(agent: Agent, url: URL, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(BODY)) },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(BODY);
  });
}

async function send(message: Extract<ToSenders, { type: "send" }>): Promise<FromSenders> {
  const url = new URL(message.url);
  const agent = new Agent({ keepAlive: true, maxSockets: message.concurrency });
  const signer = new Webhook(message.valid ? message.secret : "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
  const statuses: Record<string, number> = {};
  const one = async () => {
    const id = `msg_${randomUUID()}`;
    const at = new Date();
    const status = await post(agent, url, {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": signer.sign(id, at, BODY),
    });
    statuses[status] = (statuses[status] ?? 0) + 1;
  };
  const started = performance.now();
  const end = started + message.seconds * 1000;
  if (message.perSecond) {
    // Batches every 10 ms, so the load is spread over each second rather than sent at its start.
    const batch = message.perSecond / 100;
    const pending: Promise<void>[] = [];
    for (let tick = 0; performance.now() < end; tick++) {
      for (let i = 0; i < batch; i++) pending.push(one());
      const next = started + (tick + 1) * 10;
      await sleep(Math.max(0, next - performance.now()));
    }
    await Promise.all(pending);
  } else {
    await Promise.all(
      Array.from({ length: message.concurrency }, async () => {
        while (performance.now() < end) await one();
      }),
    );
  }
  agent.destroy();
  return { type: "sent", statuses, seconds: (performance.now() - started) / 1000 };
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  process.on("message", (message: ToSenders) => {
    if (message.type === "stop") return process.disconnect();
    send(message).then(
      (answer) => process.send!(answer),
      (err: unknown) => process.send!({ type: "error", message: err instanceof Error ? err.message : String(err) } satisfies FromSenders),
    );
  });
}
