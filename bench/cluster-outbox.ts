/**
 * Deliveries per second through the cluster's shared outbox (a BullMQ queue on a real
 * redis-server) against a daemon's own outbox (its journal) on the same machine: DELIVERIES runs'
 * answers queued at once and sent by the real webhook sender to a loopback receiver, from the first
 * enqueue until the last acknowledgement is recorded (Redis's, or the journal's synced line).
 *
 * The cluster side is three delivery workers in this one process, each a ClusterOutbox on its own
 * connection as each daemon has one, the deliveries queued round robin through them: the three
 * share this process's event loop (and the receiver's), so this measures what Redis and BullMQ
 * cost per delivery, not three machines' worth of sending. ROUNDS of each after a warm-up of each,
 * interleaved; medians.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClusterOutbox } from "../src/cluster/outbox.js";
import { connectRedis } from "../src/cluster/redis.js";
import type { DeliveryOutbox, SendFn } from "../src/delivery/delivery-outbox.js";
import type { DeliveryMessage } from "../src/delivery/message.js";
import { Outbox } from "../src/delivery/outbox.js";
import type { WebhookTarget } from "../src/delivery/targets.js";
import { sendWebhook } from "../src/delivery/webhook.js";
import { emptyUsage } from "../src/providers/types.js";
import { startRedis } from "../test/support/redis-server.js";
import { median } from "./stats.js";

export interface ClusterOutboxBenchResult {
  deliveries: number;
  workers: number;
  clusterPerSecond: number;
  singlePerSecond: number;
}

const DELIVERIES = 2_000;
const WORKERS = 3;
const ROUNDS = 3;
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const RESULT = "## Daily report\n\nAll services green. Disk usage at 61 %, up 2 points since yesterday. ".repeat(3);

function messageFor(runId: string): DeliveryMessage {
  const at = new Date().toISOString();
  return {
    kind: "run.completed",
    job: "bench",
    run: {
      id: runId,
      reason: "schedule",
      status: "ok",
      startedAt: at,
      finishedAt: at,
      durationMs: 1_000,
      usage: emptyUsage(),
      cost: 0.0042,
    },
    result: RESULT,
  };
}

/** A loopback receiver that acknowledges every POST with 204. */
async function receiver(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const send: SendFn = async (entry) => void (await sendWebhook(entry.target as WebhookTarget, entry.message, entry.id));

/** Every delivery queued at once through `outboxes` in turn, then waited for until acknowledged; deliveries per second. */
/** The bench job's one target: the cluster's outbox sends only to a target of a job it knows. */
const targetFor = (url: string): WebhookTarget => ({ kind: "webhook", url, secret: SECRET, format: "json", headers: {} });

async function round(outboxes: DeliveryOutbox[], url: string, name: string, workspace: string): Promise<number> {
  const target = targetFor(url);
  for (const outbox of outboxes) outbox.start();
  const started = performance.now();
  const ids = (
    await Promise.all(
      Array.from({ length: DELIVERIES }, (_, i) =>
        outboxes[i % outboxes.length]!.enqueue(`bench.${name}-${i}`, [target], messageFor(`${name}-${i}`), workspace),
      ),
    )
  ).flat();
  const settled = await outboxes[0]!.settled(ids);
  const seconds = (performance.now() - started) / 1_000;
  const failed = settled.filter((s) => !s.delivered).length;
  if (failed > 0) throw new Error(`${failed} deliveries not delivered`);
  await Promise.all(outboxes.map((outbox) => outbox.stop()));
  return DELIVERIES / seconds;
}

async function singleRound(url: string, name: string): Promise<number> {
  const stateDir = await mkdtemp(join(tmpdir(), "countd-bench-outbox-"));
  const outbox = await Outbox.open({ stateDir, send });
  try {
    return await round([outbox], url, name, stateDir);
  } finally {
    await outbox.close();
    await rm(stateDir, { recursive: true, force: true });
  }
}

export async function benchClusterOutbox(): Promise<ClusterOutboxBenchResult> {
  const redis = await startRedis();
  const hooks = await receiver();
  const connections = await Promise.all(
    Array.from({ length: WORKERS }, (_, i) => connectRedis(redis.url, "queues", { name: `bench-${i}` })),
  );
  const outboxes = connections.map(
    (connection) =>
      new ClusterOutbox({
        redis: connection,
        send,
        own: { targets: (job) => (job === "bench" ? [targetFor(hooks.url)] : undefined), workspace: () => tmpdir() },
      }),
  );
  const cluster: number[] = [];
  const single: number[] = [];
  try {
    await round(outboxes, hooks.url, "warm-cluster", tmpdir());
    await singleRound(hooks.url, "warm-single");
    for (let i = 0; i < ROUNDS; i++) {
      cluster.push(await round(outboxes, hooks.url, `cluster-${i}`, tmpdir()));
      single.push(await singleRound(hooks.url, `single-${i}`));
    }
  } finally {
    await Promise.all(outboxes.map((outbox) => outbox.close()));
    for (const connection of connections) connection.disconnect();
    await hooks.close();
    await redis.stop();
  }
  return { deliveries: DELIVERIES, workers: WORKERS, clusterPerSecond: median(cluster), singlePerSecond: median(single) };
}
