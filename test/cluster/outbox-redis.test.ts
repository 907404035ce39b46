import type { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ClusterOutbox } from "../../src/cluster/outbox.js";
import { connectRedis } from "../../src/cluster/redis.js";
import { message } from "../../src/delivery/dispatch.js";
import type { WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { startRedis, type RedisServer } from "../support/redis-server.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * A run's answer queued while Redis is away: the queueing waits for Redis (the run does not count
 * as ended before its deliveries are stored), and once Redis is back the delivery is stored and
 * sent, once. The Redis that comes back is empty (its files gone with the machine): what was
 * queued during the outage must still be there.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

describe.skipIf(!hasRedis)("the cluster's outbox while Redis is away", () => {
  const servers: RedisServer[] = [];
  let client: Redis | undefined;
  let outbox: ClusterOutbox | undefined;
  let hooks: WebhookReceiver | undefined;
  afterEach(async () => {
    await outbox?.close();
    client?.disconnect();
    await hooks?.close();
    for (const server of servers) await server.stop();
  });

  it("waits to queue a delivery until Redis is back, then sends it once", { timeout: 60_000 }, async () => {
    hooks = await startWebhookReceiver({ secret: SECRET });
    const target: WebhookTarget = { kind: "webhook", url: hooks.url, secret: SECRET, format: "json", headers: {} };
    const first = await startRedis();
    servers.push(first);
    client = await connectRedis(first.url, "queues", { name: "countd-test" });
    outbox = new ClusterOutbox({
      redis: client,
      send: async (entry) => void (await sendWebhook(entry.target as WebhookTarget, entry.message, entry.id)),
      own: { targets: (job) => (job === "report" ? [target] : undefined), workspace: () => "/tmp" },
    });
    outbox.start();
    const at = new Date().toISOString();
    const before: RunRecord = {
      id: "20261130T090000Z-here",
      job: "report",
      reason: "schedule",
      scheduledAt: at,
      startedAt: at,
      finishedAt: at,
      status: "ok",
      iterations: 1,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: "report/here",
    };
    const sent = await outbox.enqueue(
      `report.${before.id}`,
      [target],
      message("run.completed", "report", before, "the first report"),
      "/tmp",
    );
    expect(await outbox.settled(sent)).toEqual([{ id: sent[0], delivered: true }]);

    await first.stop();
    const run: RunRecord = {
      id: "20261130T090000Z-away",
      job: "report",
      reason: "schedule",
      scheduledAt: at,
      startedAt: at,
      finishedAt: at,
      status: "ok",
      iterations: 1,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: "report/away",
    };
    let queued = false;
    const enqueued = outbox
      .enqueue(`report.${run.id}`, [target], message("run.completed", "report", run, "the report"), "/tmp")
      .then((ids) => {
        queued = true;
        return ids;
      });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(queued).toBe(false);

    servers.push(await startRedis([], { port: first.port }));
    const [id] = await enqueued;
    await vi.waitFor(() => expect(hooks!.acknowledgedIds()).toEqual([sent[0], id]), { timeout: 30_000, interval: 200 });
    expect(await outbox.settled([id!])).toEqual([{ id, delivered: true }]);
    expect(hooks.requests).toHaveLength(2);
  });
});
