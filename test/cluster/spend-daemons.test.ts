import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readSpend } from "../../src/store/spend-ledger.js";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import { startDaemon } from "../support/cli-daemon.js";
import { runCountd } from "../support/daemon-process.js";
import { freePort } from "../support/redis-server.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Three daemons as separate processes, each in a folder of its own (its own state directory and
 * spend files, as on three machines), on one real redis-server, with countd.yaml's
 * `budget.per_day` of $0.01 meant for the whole cluster.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const MODEL = "budget-model";
/** $1 per million tokens either way: a call of 12,000 + 1,000 tokens costs $0.0130, one of 1,000 + 100 $0.0011. */
const SETTINGS = [
  `provider:\n  preset: openai\n  model: ${MODEL}`,
  `prices:\n  ${MODEL}: { input: 1, output: 1 }`,
  "budget:\n  per_day: 0.01\n  timezone: UTC",
];

describe.skipIf(!hasRedis)("the daily budget of a cluster of three daemons", { timeout: 120_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;

  it("stops a run on one node once runs on others spent budget.per_day, and countd cost on a third sums every node's calls", async () => {
    mock.onMessage("Spend", { content: "Spent.", usage: { prompt_tokens: 12_000, completion_tokens: 1_000 } });
    mock.onMessage("Other work", { content: "Done.", usage: { prompt_tokens: 1_000, completion_tokens: 100 } });
    const jobs = { spender: "prompt: Spend\ntools: []\n", other: "prompt: Other work\ntools: []\n" };
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, jobs, SETTINGS)));
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    const [a, b, c] = dirs as [string, string, string];
    const run = (dir: string, job: string) => runCountd(["run", job], { cwd: dir, env: cluster.env });

    expect(await run(c, "other")).toMatchObject({ code: 0, stdout: "Done.\n" });
    expect(await run(a, "spender")).toMatchObject({ code: 0, stdout: "Spent.\n" });
    const stopped = await run(b, "other");
    expect(stopped.code).toBe(1);
    expect(mock.getRequests()).toHaveLength(2);

    const onB = (await nodeHistory(b, "other", cluster.env)).find((record) => record.node === "n2");
    const today = new Date().toISOString().slice(0, 10);
    expect(onB).toMatchObject({
      status: "budget",
      iterations: 0,
      error: `countd's daily budget (budget.per_day) of $0.0100 is spent: all runs have cost $0.0141 on ${today} (UTC)`,
    });

    const cost = await runCountd(["cost", "--by", "job", "--json"], { cwd: c, env: cluster.env });
    expect(cost).toMatchObject({ code: 0, stderr: "" });
    const summed = JSON.parse(cost.stdout) as {
      rows: { key: string; calls: number; cost: number }[];
      total: { calls: number; cost: number };
    };
    expect(summed.rows.map((row) => [row.key, row.calls, row.cost])).toEqual([
      ["spender", 1, 0.013],
      ["other", 1, 0.0011],
    ]);
    expect(summed.total).toMatchObject({ calls: 2, cost: 0.0141 });

    // /api/status on any node shows the cluster's day.
    const status = await runCountd(["status"], { cwd: b, env: cluster.env });
    expect(status.stdout).toMatch(/^budget: +\$0\.0141 of \$0\.0100/m);

    // Each node's spend file stays its own audit: node C's has its one call.
    await cluster.stopDaemons();
    const local = await readSpend(join(c, "state"), new Date(Date.now() - 3_600_000));
    expect(local.map((line) => [line.job, line.cost])).toEqual([["other", 0.0011]]);
    expect(await readdir(join(b, "state", "spend")).catch(() => [])).toEqual([]);

    // `countd run` with no daemon on the node counts the cluster's day too.
    const alone = await run(c, "other");
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain("countd's daily budget (budget.per_day) of $0.0100 is spent: all runs have cost $0.0141");
    expect(mock.getRequests()).toHaveLength(2);
  });

  it("countd cost says in one line that Redis cannot be reached, naming the URL without its password, and exits 78", async () => {
    const port = await freePort();
    const dir = await nodeFolder(`redis://:pw-Secret-42@127.0.0.1:${port}/0`, "n1", {});
    const cost = await runCountd(["cost"], { cwd: dir, env: cluster.env });
    expect(cost.code).toBe(78);
    expect(cost.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(
        new RegExp(`^countd: cannot reach Redis at redis://127\\.0\\.0\\.1:${port}/0 \\(cluster\\.redis\\): .*ECONNREFUSED`),
      ),
    ]);
    expect(cost.stdout + cost.stderr).not.toContain("pw-Secret-42");
  });
});
