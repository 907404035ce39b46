import { Queue } from "bullmq";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ClusterFires, slotId } from "../../src/cluster/fires.js";
import { ClusterOutbox } from "../../src/cluster/outbox.js";
import { RedisRunHistory } from "../../src/cluster/run-history.js";
import { message } from "../../src/delivery/dispatch.js";
import type { WebhookTarget } from "../../src/delivery/targets.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunEnd, RunOptions } from "../../src/runner/requests.js";
import type { FireRequest } from "../../src/runner/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { makeJob } from "../support/runner-jobs.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

/*
 * A daemon that went after its run ended and queued its answer in the cluster's outbox, but before
 * it noted the run's end in the fire: the daemon that takes the fire over finds the answer queued,
 * so it does not run the job again (a rerun is a new run whose answer would have new delivery ids,
 * and go out a second time), and does not report the run as cut short.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const at = (second: number) => new Date(Date.UTC(2026, 10, 30, 9, 0, second));
const target: WebhookTarget = { kind: "webhook", url: "http://127.0.0.1:9/hook", format: "json", headers: {} };
const left = { id: "20261130T090000Z-dead", node: "n9", attempt: 1 };

describe.skipIf(!hasRedis)("a run left between queueing its answer and noting its end", () => {
  const redis = useRedis();
  let fires: ClusterFires | undefined;
  let outbox: ClusterOutbox | undefined;
  let queue: Queue | undefined;
  afterEach(async () => {
    await fires?.stop(async () => {});
    await queue?.close();
    await outbox?.close();
  });

  it("is recorded interrupted as ended, not run again and not reported, though an attempt is spare", async () => {
    const client = await redis.connect("queues");
    const job = makeJob("report", { retry: { attempts: 3, backoffMs: 1_000 }, deliver: [target] });
    const record: RunRecord = {
      id: left.id,
      job: "report",
      reason: "schedule",
      scheduledAt: at(0).toISOString(),
      startedAt: at(1).toISOString(),
      status: "running",
      iterations: 0,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: `report/${left.id}`,
      node: left.node,
      attempt: 1,
    };
    const history = new RedisRunHistory(client);
    await history.save("report", [record]);
    // Not started: the answer stays queued, as it is while its receiver is down.
    outbox = new ClusterOutbox({ redis: client, send: async () => {}, own: { targets: () => [target], workspace: () => "/tmp" } });
    await outbox.enqueue(
      `report.${left.id}`,
      [target],
      message("run.completed", "report", { ...record, status: "ok", finishedAt: at(5).toISOString() }, "the report"),
      "/tmp",
    );
    queue = new Queue("runs", { connection: client, prefix: "countd" });
    await queue.add(
      "report",
      { job: "report", reason: "schedule", scheduledAt: at(0).toISOString(), run: left },
      { jobId: slotId("report", at(0)) },
    );

    const started: Array<{ request: FireRequest; opts: RunOptions | undefined }> = [];
    const reported: RunRecord[] = [];
    fires = new ClusterFires({
      redis: client,
      runner: {
        request: (request, opts) => (
          started.push({ request, opts }),
          { decision: "queued", started: Promise.resolve(undefined), ended: Promise.resolve({} as RunEnd) }
        ),
      },
      job: () => job,
      concurrency: 1,
      node: "n1",
      history,
      state: { refresh: async () => {} },
      interrupted: async (_job, run) => void reported.push(run),
      queued: (found, runId) => outbox!.queuedStatus(found, runId),
    });
    await vi.waitFor(async () => expect(await queue!.getJobState(slotId("report", at(0)))).toBe("completed"));

    expect((await history.runs("report"))[0]).toMatchObject({
      status: "interrupted",
      error: "node n9 stopped after this run ended (ok) and queued its deliveries, before its record was saved",
    });
    expect(started).toEqual([]);
    expect(reported).toEqual([]);
    expect((await outbox.list()).pending.map((entry) => entry.message.run.id)).toEqual([left.id]);
  });
});
