import { describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import { startDaemon, stopDaemon } from "../support/cli-daemon.js";
import { logLines, spawnDaemon } from "../support/daemon-process.js";
import { freePort, startRedis } from "../support/redis-server.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Three daemons, each a `countd start` process in a folder of its own (its own state directory,
 * as on three machines), share one real redis-server on loopback. What is checked is what a user
 * sees: the run records `countd history` lists on each node.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!hasRedis)("a cluster of three daemons on one Redis", { timeout: 150_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;

  const history = (dir: string, job: string) => nodeHistory(dir, job, cluster.env);

  it("runs each slot of a job due every 2 s once, on more than one node, and every node's history lists the same runs", async () => {
    mock.onMessage("tick", { content: "tock" });
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, { tick: "prompt: tick\nevery: 2s\n" })));
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    const allUp = Date.now();
    await sleep(30_000);
    const firstDown = Date.now();
    expect(await Promise.all(cluster.daemons.map((daemon) => stopDaemon(daemon)))).toEqual([0, 0, 0]);

    const [runs, ...others] = await Promise.all(dirs.map((dir) => history(dir, "tick")));
    for (const other of others) expect(other.map((run) => run.id).sort()).toEqual(runs!.map((run) => run.id).sort());

    const bySlot = new Map<string, RunRecord[]>();
    for (const run of runs!) bySlot.set(run.scheduledAt, [...(bySlot.get(run.scheduledAt) ?? []), run]);
    const doubled = [...bySlot].filter(([, same]) => same.length > 1);
    expect(doubled).toEqual([]);
    // Every slot while all three ran, a slot's length clear of the starts and stops.
    const expected: string[] = [];
    for (let slot = Math.ceil((allUp + 2_000) / 2_000) * 2_000; slot < firstDown - 2_000; slot += 2_000)
      expected.push(new Date(slot).toISOString());
    expect(expected.length).toBeGreaterThanOrEqual(12);
    const missed = expected.filter((slot) => !bySlot.has(slot));
    expect(missed).toEqual([]);
    for (const slot of expected) expect(bySlot.get(slot)![0]).toMatchObject({ status: "ok", reason: "schedule" });
    const nodes = new Set(runs!.map((run) => run.node));
    expect(nodes.size).toBeGreaterThan(1);
    for (const node of nodes) expect(NODES).toContain(node);
    process.stderr.write(
      `cluster: ${expected.length} slots while all ran, ${runs!.length} runs in all, ${doubled.length} doubled, ${missed.length} missed; by node: ${NODES.map((node) => `${node} ${runs!.filter((run) => run.node === node).length}`).join(", ")}\n`,
    );
  });

  it("after every daemon was down across two slots, runs the latest missed slot once (catch-up), whichever daemons start", async () => {
    mock.onMessage("report", { content: "the report" });
    // Long enough for three daemons to start within one period on a loaded machine (10 s was not).
    const PERIOD = 20_000;
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, { report: "prompt: report\nevery: 20s\ncatch_up: 1h\n" })),
    );
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    // The first slot every daemon saw fire (each records the slots its timer fired in its state.json).
    const seen = Math.ceil((Date.now() + 100) / PERIOD) * PERIOD;
    await vi.waitFor(
      async () =>
        expect(
          (await history(dirs[0]!, "report")).find((run) => Date.parse(run.scheduledAt) === seen && run.status === "ok"),
        ).toBeDefined(),
      {
        timeout: 30_000,
        interval: 500,
      },
    );
    await cluster.stopDaemons();

    // Down across the next two slots; started together a second after the second one.
    const missed = [seen + PERIOD, seen + 2 * PERIOD];
    await sleep(missed[1]! + 1_000 - Date.now());
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    expect(Date.now()).toBeLessThan(missed[1]! + PERIOD);
    await vi.waitFor(
      async () =>
        expect((await history(dirs[1]!, "report")).filter((run) => run.reason === "catch-up" && run.status === "ok")).toHaveLength(1),
      {
        timeout: 30_000,
        interval: 500,
      },
    );
    await cluster.stopDaemons();

    const runs = await history(dirs[2]!, "report");
    const catchUps = runs.filter((run) => run.reason === "catch-up");
    expect(catchUps).toHaveLength(1);
    expect(catchUps[0]).toMatchObject({ scheduledAt: new Date(missed[1]!).toISOString(), status: "ok" });
    expect(runs.filter((run) => run.scheduledAt === new Date(missed[0]!).toISOString())).toEqual([]);
    process.stderr.write(`cluster catch-up: ${catchUps.length} catch-up run after two missed slots, on ${catchUps[0]!.node}\n`);
  });

  it("never runs an overlap: skip job on two nodes at once, and records each slot it skipped once", async () => {
    // Each run takes 5 s, so of a slot every 2 s most find a run in progress on some node.
    mock.onMessage("slow", async () => {
      await sleep(5_000);
      return { content: "done" };
    });
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, { slow: "prompt: slow\nevery: 2s\noverlap: skip\n" })),
    );
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    const allUp = Date.now();
    // Until two runs ended ok and three slots were skipped.
    await vi.waitFor(
      async () => {
        const runs = await history(dirs[0]!, "slow");
        expect(runs.filter((run) => run.status === "ok").length).toBeGreaterThanOrEqual(2);
        expect(runs.filter((run) => run.status === "skipped").length).toBeGreaterThanOrEqual(3);
      },
      { timeout: 60_000, interval: 500 },
    );
    const firstDown = Date.now();
    await cluster.stopDaemons();

    const runs = await history(dirs[0]!, "slow");
    const ran = runs.filter((run) => run.status !== "skipped").sort((a, b) => a.startedAt.localeCompare(b.startedAt));
    for (const [i, run] of ran.entries()) {
      const next = ran[i + 1];
      if (next) expect(Date.parse(next.startedAt)).toBeGreaterThanOrEqual(Date.parse(run.finishedAt!));
    }
    const skipped = runs.filter((run) => run.status === "skipped");
    for (const run of skipped) expect(run.error).toBe("a run of this job was waiting or in progress in the cluster (overlap: skip)");
    for (let slot = Math.ceil((allUp + 2_000) / 2_000) * 2_000; slot < firstDown - 6_000; slot += 2_000) {
      expect(runs.filter((run) => run.scheduledAt === new Date(slot).toISOString())).toHaveLength(1);
    }
    expect(ran.filter((run) => run.status === "ok").length).toBeGreaterThanOrEqual(2);
    expect(skipped.length).toBeGreaterThanOrEqual(3);
    process.stderr.write(
      `cluster overlap skip: ${ran.length} runs, none overlapping, ${skipped.length} skipped slots each recorded once\n`,
    );
  });

  it("warns at start when Redis may evict keys (maxmemory-policy other than noeviction)", async () => {
    const evicting = await startRedis(["--maxmemory-policy", "allkeys-lru"]);
    try {
      const dir = await nodeFolder(evicting.url, "n1", {});
      const daemon = await startDaemon(dir, cluster.env);
      cluster.daemons = [daemon];
      const warnings = logLines(daemon.output())
        .filter((line) => line["level"] === 40)
        .map((line) => line["msg"]);
      expect(warnings).toContainEqual(expect.stringContaining("has maxmemory-policy allkeys-lru, not noeviction"));
      await stopDaemon(daemon);
      cluster.daemons = [];
    } finally {
      await evicting.stop();
    }
  });
});

describe.skipIf(!hasRedis)("a daemon whose Redis cannot be reached", () => {
  it("says so in one line naming the URL without its password, and exits 78 (systemd's configuration error)", async () => {
    const port = await freePort();
    const dir = await nodeFolder(`redis://:pw-Secret-42@127.0.0.1:${port}/0`, "n1", {});
    const daemon = spawnDaemon(dir, {});
    expect(await daemon.exited).toBe(78);
    const lines = daemon.output().trim().split("\n");
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(`^countd: cannot reach Redis at redis://127\\.0\\.0\\.1:${port}/0 \\(cluster\\.redis\\): .*ECONNREFUSED`),
      ),
    ]);
    expect(daemon.output()).not.toContain("pw-Secret-42");
  });
});
