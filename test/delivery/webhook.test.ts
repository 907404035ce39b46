import { createServer } from "node:http";
import { deliveryFailure as failure } from "../support/delivery-error.js";
import { afterEach, describe, expect, it } from "vitest";
import type { WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { closeServer, listenLoopback } from "../support/loopback.js";
import { completedMessage } from "../support/delivery-message.js";
import { entryShape } from "../../src/store/outbox-shapes.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DELIVERY_ID = "daily-report.20260301T090000Z-ab12.webhook-127.0.0.1-0123456789ab";

const message = completedMessage({
  job: "daily-report",
  runId: "20260301T090000Z-ab12",
  startedAt: "2026-03-01T09:00:00.000Z",
  durationMs: 90_000,
  result: "# Sales\n\nUp 4% on last week.",
});

let receivers: WebhookReceiver[] = [];
async function receiver(opts: Parameters<typeof startWebhookReceiver>[0] = {}): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver(opts);
  receivers.push(started);
  return started;
}
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

const target = (url: string, extra: Partial<WebhookTarget> = {}): WebhookTarget => ({
  kind: "webhook",
  url,
  secret: SECRET,
  format: "json",
  headers: {},
  ...extra,
});

describe("sendWebhook, json format", () => {
  it("POSTs the run as JSON signed per Standard Webhooks, which the receiver verifies", async () => {
    const peer = await receiver({ secret: SECRET });
    const result = await sendWebhook(target(peer.url, { headers: { "X-Team": "ops" } }), message, DELIVERY_ID);
    expect(result.status).toBe(200);
    const [request] = peer.requests;
    expect(request?.verified).toBe(true);
    expect(request?.headers["webhook-id"]).toBe(DELIVERY_ID);
    expect(request?.headers["content-type"]).toBe("application/json");
    expect(request?.headers["x-team"]).toBe("ops");
    expect(JSON.parse(request!.body)).toEqual({ type: "run.completed", job: "daily-report", run: message.run, result: message.result });
  });

  it("signs every secret and body as the Standard Webhooks library does, non-ASCII text and a padded key included", async () => {
    for (const secret of [SECRET, "whsec_c2hvcnQ=", "whsec_dHdvIGJ5dGVzIHBhZA=="]) {
      const peer = await receiver({ secret });
      const sent = { ...message, result: "Umsatz +4 % · 売上 · 🚀 «done»" };
      await sendWebhook(target(peer.url, { secret }), sent, DELIVERY_ID);
      await sendWebhook(target(peer.url, { secret }), sent, `${DELIVERY_ID}-again`);
      expect(peer.requests.map((request) => request.verified)).toEqual([true, true]);
    }
  });

  it("sends a failed run's error and last tool calls beside the result", async () => {
    const peer = await receiver({ secret: SECRET });
    const lastToolCalls = [{ name: "exec", status: "error" as const, summary: "make → exit 2" }];
    await sendWebhook(target(peer.url), { ...message, kind: "run.failed", error: "exit 2", lastToolCalls }, DELIVERY_ID);
    expect(JSON.parse(peer.requests[0]!.body)).toMatchObject({ type: "run.failed", error: "exit 2", lastToolCalls });
  });

  it("gives the run's cost in USD, null for an unpriced model and for an entry queued before pricing", async () => {
    const peer = await receiver({ secret: SECRET });
    await sendWebhook(target(peer.url), message, DELIVERY_ID);
    await sendWebhook(target(peer.url), { ...message, run: { ...message.run, cost: null } }, `${DELIVERY_ID}-unpriced`);
    // As the outbox journal holds an entry written by a countd before pricing: its run has no cost.
    const { cost: _cost, ...before } = message.run;
    const queued = entryShape.parse({
      id: `${DELIVERY_ID}-old`,
      target: target(peer.url),
      message: { ...message, run: before },
      workspace: "/srv/workspace",
      createdAt: message.run.finishedAt,
      giveUpAt: message.run.finishedAt,
      attempts: 0,
      nextAttemptAt: message.run.finishedAt,
      status: "pending",
    });
    await sendWebhook(target(peer.url), queued.message, queued.id);
    const runs = peer.requests.map((request) => (JSON.parse(request.body) as { run: Record<string, unknown> }).run);
    expect(runs.map((run) => run["cost"])).toEqual([0.0123, null, null]);
    expect(peer.requests.every((request) => request.verified)).toBe(true);
  });

  it("signs with a key the receiver does not hold → the receiver refuses it", async () => {
    const peer = await receiver({ secret: "whsec_b3RoZXIta2V5LW9mLXRoZS1yZWNlaXZlcg==" });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    expect(peer.requests[0]?.verified).toBe(false);
    expect(err.permanent).toBe(true);
    expect(err.status).toBe(401);
  });

  it("sends a URL's user and password as basic auth, and leaves them out of the path", async () => {
    const peer = await receiver({ secret: SECRET });
    const url = new URL(peer.url);
    url.username = "countd";
    url.password = "p@ss word";
    await sendWebhook(target(url.href), message, DELIVERY_ID);
    const [request] = peer.requests;
    expect(request?.verified).toBe(true);
    expect(request?.headers["authorization"]).toBe(`Basic ${Buffer.from("countd:p@ss word").toString("base64")}`);
    expect(request?.url).toBe(new URL(peer.url).pathname);
  });

  it("carries the same webhook-id when the same delivery is sent again, so the receiver can drop the copy", async () => {
    const peer = await receiver({ secret: SECRET, steps: [500] });
    await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    await sendWebhook(target(peer.url), message, DELIVERY_ID);
    expect(peer.requests.map((r) => r.headers["webhook-id"])).toEqual([DELIVERY_ID, DELIVERY_ID]);
    expect(peer.requests.every((r) => r.verified)).toBe(true);
    expect(peer.acknowledgedIds()).toEqual([DELIVERY_ID]);
  });
});

describe("sendWebhook failures", () => {
  it("400 is permanent", async () => {
    const peer = await receiver({ steps: [{ status: 400, body: "unknown event type" }] });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    expect(err).toMatchObject({ permanent: true, status: 400, disableTarget: false });
    expect(err.reason).toBe(`${new URL(peer.url).origin} answered HTTP 400: unknown event type`);
  });

  it("410 is permanent and disables the target", async () => {
    const peer = await receiver({ steps: [410] });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    expect(err).toMatchObject({ permanent: true, status: 410, disableTarget: true });
  });

  it("429 with Retry-After in seconds is temporary and says how long to wait", async () => {
    const peer = await receiver({ steps: [{ status: 429, headers: { "Retry-After": "120" } }] });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    expect(err).toMatchObject({ permanent: false, status: 429, retryAfterMs: 120_000 });
  });

  it("503 with Retry-After as a date waits until that date", async () => {
    const now = new Date("2026-03-01T09:00:00Z");
    const peer = await receiver({ steps: [{ status: 503, headers: { "Retry-After": "Sun, 01 Mar 2026 09:05:00 GMT" } }] });
    // Without a secret: the receiver's clock would refuse the signature of a timestamp from the past.
    const err = await failure(sendWebhook(target(peer.url, { secret: undefined }), message, DELIVERY_ID, { now: () => now }));
    expect(err).toMatchObject({ permanent: false, status: 503, retryAfterMs: 300_000 });
    expect(peer.requests[0]?.headers["webhook-timestamp"]).toBe(String(now.getTime() / 1000));
  });

  it("500, 408 and 425 are temporary", async () => {
    const peer = await receiver({ steps: [500, 408, 425] });
    for (const status of [500, 408, 425]) {
      const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
      expect(err).toMatchObject({ permanent: false, status });
    }
  });

  it("a receiver that never answers times out, temporarily", async () => {
    const peer = await receiver({ steps: ["hang"] });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID, { timeoutMs: 200 }));
    expect(err.permanent).toBe(false);
    expect(err.reason).toBe(`no answer from ${new URL(peer.url).origin} within 200 ms`);
    expect(peer.requests).toHaveLength(1);
  });

  it("a refused connection is temporary", async () => {
    const peer = await receiver();
    const url = peer.url;
    await peer.close();
    receivers = [];
    const err = await failure(sendWebhook(target(url), message, DELIVERY_ID));
    expect(err.permanent).toBe(false);
    expect(err.reason).toBe(`could not reach ${new URL(url).origin}: ECONNREFUSED`);
  });

  it("does not follow a redirect: a 3xx fails for good", async () => {
    const elsewhere = await receiver();
    const peer = await receiver({ steps: [{ status: 307, headers: { Location: `${elsewhere.url}?token=abcdefghijkl` } }] });
    const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
    expect(err).toMatchObject({ permanent: true, status: 307 });
    expect(err.reason).toContain(`a redirect to ${new URL(elsewhere.url).origin};`);
    expect(err.reason).not.toContain("abcdefghijkl");
    expect(elsewhere.requests).toHaveLength(0);
  });

  it("never puts the secret, a credential header or the URL's token in the reason, even when the receiver echoes them", async () => {
    const token = "tok-0123456789abcdef";
    const peer = await receiver();
    peer.script({ status: 403, body: `bad auth "Bearer ${token}" for ${SECRET} at /hook?key=${token}` });
    const err = await failure(
      sendWebhook(target(`${peer.url}?key=${token}`, { headers: { Authorization: `Bearer ${token}` } }), message, DELIVERY_ID),
    );
    expect(err.permanent).toBe(true);
    expect(err.reason).not.toContain(token);
    expect(err.reason).not.toContain(SECRET);
    expect(err.reason).toContain("[redacted]");
  });
});

describe("sendWebhook: the answer's body is read only as far as an excerpt", () => {
  /** A real receiver that answers `status` with a body that never ends; counts what it managed to write. */
  async function endlessAnswer(
    status: number,
  ): Promise<{ url: string; written: () => number; closed: Promise<void>; close: () => Promise<void> }> {
    let written = 0;
    let onClosed: () => void = () => {};
    const closed = new Promise<void>((resolve) => (onClosed = resolve));
    const chunk = Buffer.alloc(64 * 1024, "x");
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(status, { "content-type": "text/plain" });
        const pump = () => {
          while (!res.destroyed && res.write(chunk)) written += chunk.length;
        };
        res.on("drain", () => {
          written += chunk.length;
          pump();
        });
        res.on("close", onClosed);
        pump();
      });
    });
    const port = await listenLoopback(server);
    return {
      url: `http://127.0.0.1:${port}/hook`,
      written: () => written,
      closed,
      close: async () => {
        await closeServer(server);
      },
    };
  }

  it("a 2xx with an endless body is a success, and the connection is closed after the excerpt", async () => {
    const peer = await endlessAnswer(200);
    try {
      for (const format of ["json", "wecom"] as const) {
        const sent = await sendWebhook(target(peer.url, format === "json" ? {} : { format, secret: undefined }), message, DELIVERY_ID);
        expect(sent.status).toBe(200);
      }
      await peer.closed;
      // Socket buffers on both sides take some; the rest was never asked for.
      expect(peer.written()).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await peer.close();
    }
  });

  it("an error status with an endless body fails at once with a short excerpt", async () => {
    const peer = await endlessAnswer(500);
    try {
      const err = await failure(sendWebhook(target(peer.url), message, DELIVERY_ID));
      expect(err).toMatchObject({ permanent: false, status: 500 });
      expect(err.reason).toBe(`${new URL(peer.url).origin} answered HTTP 500: ${"x".repeat(200)}`);
      await peer.closed;
      expect(peer.written()).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await peer.close();
    }
  });
});
