import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * `after:` on two daemons and one real Redis: the scheduled upstream's runs are spread over the
 * nodes, and each of its runs fires its follower once, on the node where the run ended (the
 * runner's run.finished is heard on that node's bus alone).
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2"];

describe.skipIf(!hasRedis)("jobs that follow jobs in a cluster", { timeout: 180_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;

  it("fires the follower once per upstream run, on the node that ran it", async () => {
    mock.onMessage("Collect the items", { content: "Items." }, { latency: 300 });
    mock.onMessage("Summarise run", { content: "Summary." });
    const jobs = {
      collect: "every: 2s\ntools: []\nprompt: Collect the items.\n",
      summarise: "after: { job: collect }\ntools: []\nprompt: 'Summarise run {{upstream.run_id}}: {{upstream.answer}}'\n",
    };
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, jobs)));
    await startNodes(dirs, cluster.env, cluster.daemons);

    await vi.waitFor(
      async () => {
        const collected = (await nodeHistory(dirs[0]!, "collect", cluster.env)).filter((run) => run.status === "ok");
        expect(collected.length).toBeGreaterThanOrEqual(4);
      },
      { timeout: 90_000, interval: 500 },
    );
    // Let the last follower end, then nothing more starts.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await cluster.stopDaemons();

    const collect = await nodeHistory(dirs[0]!, "collect", cluster.env);
    const summarise = await nodeHistory(dirs[1]!, "summarise", cluster.env);
    const nodeOf = new Map(collect.map((run) => [run.id, run.node]));
    const followed = mock
      .getRequests()
      .map((request) => JSON.stringify(request.body))
      .flatMap((body) => /Summarise run (\S+):/.exec(body)?.slice(1) ?? []);
    expect(followed.length).toBeGreaterThanOrEqual(3);
    // Once each, and each a run of collect that ended ok.
    expect(new Set(followed).size).toBe(followed.length);
    for (const id of followed) expect(collect.find((run) => run.id === id)?.status).toBe("ok");
    // On the node that ran its upstream: each follower's journal, kept by the node that ran it, names the run it followed.
    const followers = summarise.filter((run) => run.reason === "after");
    expect(followers).toHaveLength(followed.length);
    for (const run of followers) {
      const dir = dirs[NODES.indexOf(run.node!)]!;
      const fire = JSON.parse((await readFile(join(dir, "state", "journal", "summarise", `${run.id}.jsonl`), "utf8")).split("\n")[0]!) as {
        upstream: { run: string };
      };
      expect(nodeOf.get(fire.upstream.run)).toBe(run.node);
    }
  });
});
