import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { describe, expect, it, vi } from "vitest";
import { ClusterSpend, readClusterSpend } from "../../src/cluster/spend.js";
import { SpendLedger, type SpendLine } from "../../src/store/spend-ledger.js";
import { captureLog } from "../support/log-capture.js";
import { startRedis } from "../support/redis-server.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NOW = new Date("2026-11-30T09:00:00Z");
const DAY_MS = 86_400_000;

const call = (job: string, cost: number | null, tokens = 1_000): SpendLine => ({
  at: NOW.toISOString(),
  job,
  run: `${job}-run`,
  model: "m",
  usage: { inputTokens: tokens, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 },
  cost,
});

describe.skipIf(!hasRedis)("the spend the daily budgets count in a cluster", () => {
  const redis = useRedis();

  /** A node: its own state directory's spend files and its connection to the cluster's Redis, on `timeZone`'s days. */
  async function node(
    url: string,
    opts: { timeZone?: string; log?: ReturnType<typeof captureLog>["log"] } = {},
  ): Promise<{ spend: ClusterSpend; local: SpendLedger; client: Redis }> {
    const client = await redis.connect("records", url);
    const local = await SpendLedger.open(await mkdtemp(join(tmpdir(), "countd-node-")), { now: () => NOW });
    const spend = new ClusterSpend(client, local, {
      timeZone: () => opts.timeZone ?? "UTC",
      keptMs: () => 30 * DAY_MS,
      now: () => NOW,
      ...(opts.log ? { log: opts.log } : {}),
    });
    return { spend, local, client };
  }

  it("counts every node's calls in the day's figures, all jobs' and each job's; each node's file keeps its own", async () => {
    const [a, b] = [await node(redis.url, { timeZone: "Pacific/Auckland" }), await node(redis.url, { timeZone: "Pacific/Auckland" })];
    a.spend.record(call("report", 0.5));
    b.spend.record(call("digest", 0.25, 500));
    b.spend.record(call("report", null, 200));
    await Promise.all([a.spend.flush(), b.spend.flush()]);
    // 09:00 UTC is 22:00 on 30 November in Auckland.
    expect(await a.spend.today("Pacific/Auckland")).toEqual({ cost: 0.75, tokens: 1_700, date: "2026-11-30" });
    expect(await b.spend.today("Pacific/Auckland", "report")).toEqual({ cost: 0.5, tokens: 1_200, date: "2026-11-30" });
    expect(a.local.today("Pacific/Auckland")).toEqual({ cost: 0.5, tokens: 1_000, date: "2026-11-30" });
    const lines = await readClusterSpend(a.client, new Date(NOW.getTime() - 60_000), NOW);
    expect(lines.map((line) => [line.job, line.cost]).sort()).toEqual([
      ["digest", 0.25],
      ["report", null],
      ["report", 0.5],
    ]);
  });

  it("answers a budget check with this node's own figures while Redis does not answer, and counts what it missed once it is back", async () => {
    const own = await startRedis();
    try {
      const logs = captureLog();
      const [a, b] = [await node(own.url, { log: logs.log }), await node(own.url)];
      b.spend.record(call("other", 1));
      await b.spend.flush();
      a.spend.record(call("report", 0.5));
      await a.spend.flush();
      expect(await a.spend.today("UTC")).toMatchObject({ cost: 1.5 });

      // Connected, but not answering (stopped): the check goes on with this node's figures.
      const pid = Number(/^process_id:(\d+)/m.exec(await b.client.info("server"))![1]);
      process.kill(pid, "SIGSTOP");
      try {
        expect(await a.spend.today("UTC")).toEqual({ cost: 0.5, tokens: 1_000, date: "2026-11-30" });
        // A call made meanwhile waits in the socket; counted once Redis goes on.
        a.spend.record(call("report", 0.25));
      } finally {
        process.kill(pid, "SIGCONT");
      }
      await vi.waitFor(async () => expect(await a.spend.today("UTC")).toMatchObject({ cost: 1.75 }), { interval: 50 });

      // Gone: a call made meanwhile is kept, counted here at once, and in Redis once it is back.
      await own.stop();
      await vi.waitFor(() => expect(a.client.status).not.toBe("ready"));
      a.spend.record(call("report", 2));
      expect(await a.spend.today("UTC")).toEqual({ cost: 2.75, tokens: 3_000, date: "2026-11-30" });
      const back = await startRedis([], { port: own.port });
      try {
        // Redis restarted empty (its data directory was removed): it has the call kept meanwhile, once.
        await vi.waitFor(async () => expect(await b.spend.today("UTC")).toMatchObject({ cost: 2 }), { timeout: 15_000, interval: 100 });
        expect(await a.spend.today("UTC", "report")).toMatchObject({ cost: 2 });
        expect((await readClusterSpend(b.client, new Date(NOW.getTime() - 60_000), NOW)).map((line) => line.cost)).toEqual([2]);
      } finally {
        await back.stop();
      }
      expect(logs.lines.filter((line) => line.msg.startsWith("cannot read the cluster's spend from Redis"))).toHaveLength(2);
    } finally {
      await own.stop();
    }
  });
});
