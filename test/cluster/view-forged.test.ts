import { afterEach, describe, expect, it, vi } from "vitest";
import { RUNS_PER_NODE } from "../../src/cluster/remote-runs.js";
import type { StatusView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { emptyUsage } from "../../src/providers/types.js";
import { nodeFolder, startNodes, useCluster } from "../support/cluster-nodes.js";
import { countdIn } from "../support/cli-daemon.js";
import { logLines } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";
import { connectRedis } from "../../src/cluster/redis.js";

/*
 * Anyone who can publish on the cluster's channel (`countd:view`) sends what they like: a
 * `run_started` without its run, and 10,000 runs from one node name. Every node's `/api/status`
 * (through `countd status --json`) still answers, and keeps at most RUNS_PER_NODE of that node's runs.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);
const NODES = ["n1", "n2"];

describe.skipIf(!hasRedis)("forged messages on the cluster's channel", { timeout: 120_000 }, () => {
  const cluster = useCluster();
  afterEach(async (context) => {
    if (context.task.result?.state === "fail")
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-4_000)}\n`);
    await cluster.stopDaemons();
  });

  const statusOf = async (dir: string): Promise<StatusView> => {
    const status = await countdIn(dir, cluster.env)(["status", "--json"]);
    expect(status).toMatchObject({ code: 0, stderr: "" });
    return JSON.parse(status.stdout) as StatusView;
  };

  it("drop a run_started without a run and keep at most RUNS_PER_NODE runs of one node", async () => {
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, {})));
    await startNodes(dirs, cluster.env, cluster.daemons);
    const forger = await connectRedis(cluster.redis.url, "records", { name: "forger" });
    try {
      await forger.publish(
        "countd:view",
        JSON.stringify({ kind: "live", node: "forged", message: { type: "run_started", run_id: "x", job: "j" } }),
      );
      const at = new Date().toISOString();
      const run = (id: string): RunRecord => ({
        id,
        job: "j",
        reason: "schedule",
        scheduledAt: at,
        startedAt: at,
        status: "running",
        iterations: 0,
        toolCalls: 0,
        usage: emptyUsage(),
        sessionId: `j/${id}`,
      });
      const pipeline = forger.pipeline();
      for (let i = 0; i < 10_000; i++) {
        const id = `r${String(i).padStart(5, "0")}`;
        const message = { type: "run_started", run_id: id, job: "j", run: run(id) };
        pipeline.publish("countd:view", JSON.stringify({ kind: "live", node: "forged", message }));
      }
      await pipeline.exec();
      for (const dir of dirs) {
        await vi.waitFor(
          async () => {
            const forged = (await statusOf(dir)).running.filter((active) => active.node === "forged");
            expect(forged.map((active) => active.id).sort()).toEqual(
              Array.from({ length: RUNS_PER_NODE }, (_, i) => `r${String(10_000 - RUNS_PER_NODE + i).padStart(5, "0")}`),
            );
          },
          { timeout: 10_000, interval: 250 },
        );
      }
      for (const daemon of cluster.daemons) {
        const dropped = logLines(
          daemon.output(),
          "a message on the cluster's channel does not fit; dropped (logged once a minute per kind)",
        );
        expect(dropped).toEqual([expect.objectContaining({ kind: "live run_started", problem: expect.stringContaining("message.run") })]);
      }
    } finally {
      forger.disconnect();
    }
  });
});
