import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
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

/* A held delivery (on_verify_fail: hold) in the cluster's outbox: listed held, never sent, sent once when released. */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

describe.skipIf(!hasRedis)("a held delivery in the cluster's outbox", () => {
  let server: RedisServer | undefined;
  let client: Redis | undefined;
  let outbox: ClusterOutbox | undefined;
  let hooks: WebhookReceiver | undefined;
  afterEach(async () => {
    await outbox?.close();
    client?.disconnect();
    await hooks?.close();
    await server?.stop();
  });

  it("is listed held and not sent until released, then sent once", { timeout: 60_000 }, async () => {
    hooks = await startWebhookReceiver();
    const target: WebhookTarget = { kind: "webhook", url: hooks.url, format: "json", headers: {} };
    server = await startRedis();
    client = await connectRedis(server.url, "queues", { name: "countd-test" });
    outbox = new ClusterOutbox({
      redis: client,
      send: async (entry) => void (await sendWebhook(entry.target as WebhookTarget, entry.message, entry.id)),
      own: { targets: (job) => (job === "report" ? [target] : undefined), workspace: () => "/tmp" },
    });
    outbox.start();
    const at = new Date().toISOString();
    const run: RunRecord = {
      id: "20261130T090000Z-held",
      job: "report",
      reason: "schedule",
      scheduledAt: at,
      startedAt: at,
      finishedAt: at,
      status: "ok",
      iterations: 1,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: "report/held",
    };
    const reason = "failed checks: expect $.count >= 3: $.count is 1";
    const [id] = await outbox.enqueue(`report.${run.id}`, [target], message("run.completed", "report", run, "the report"), "/tmp", reason);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(hooks.requests).toHaveLength(0);
    expect((await outbox.list()).pending).toEqual([expect.objectContaining({ id, held: reason, status: "pending" })]);

    await outbox.release(id!);
    expect(await outbox.settled([id!])).toEqual([{ id, delivered: true }]);
    await expect(outbox.release(id!)).rejects.toThrow(/not sent again/);
    expect(hooks.acknowledgedIds()).toEqual([id]);
  });
});
