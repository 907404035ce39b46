import { describe, expect, it, vi } from "vitest";
import { nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { stopDaemon } from "../support/cli-daemon.js";
import { runCountd } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Pauses across a cluster: three `countd start` processes, each in a folder of its own, on one real
 * redis-server; `countd pause` and `countd resume` run as a user runs them, on one node's CLI.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];

describe.skipIf(!hasRedis)("job state shared by three daemons on one Redis", { timeout: 150_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;

  const countd = (dir: string, args: string[]) => runCountd(args, { cwd: dir, env: cluster.env });

  it("countd pause on one node stops the job on every node (its slots recorded skipped), countd resume on another starts it again everywhere", async () => {
    mock.onMessage("tick", { content: "tock" });
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, { tick: "prompt: tick\nevery: 2s\n" })));
    await startNodes(dirs, cluster.env, cluster.daemons);
    await vi.waitFor(
      async () =>
        expect((await nodeHistory(dirs[2]!, "tick", cluster.env)).filter((run) => run.status === "ok").length).toBeGreaterThanOrEqual(2),
      {
        timeout: 30_000,
        interval: 500,
      },
    );

    expect(await countd(dirs[0]!, ["pause", "tick"])).toMatchObject({ code: 0, stdout: expect.stringContaining("paused tick") });
    const paused = Date.now();
    // Every node lists the job paused, from the shared state.
    for (const dir of dirs) expect((await countd(dir, ["jobs"])).stdout).toMatch(/tick \(paused\)/);
    // Paused across four slots at least, each recorded skipped.
    await vi.waitFor(
      async () =>
        expect(
          (await nodeHistory(dirs[2]!, "tick", cluster.env)).filter(
            (run) => Date.parse(run.scheduledAt) > paused && run.status === "skipped",
          ).length,
        ).toBeGreaterThanOrEqual(4),
      { timeout: 30_000, interval: 500 },
    );

    // A slot due while `countd resume` runs may fire either side of its write: none is asserted.
    const resumeAsked = Date.now();
    expect(await countd(dirs[1]!, ["resume", "tick"])).toMatchObject({ code: 0, stdout: "resumed tick\n" });
    const resumed = Date.now();
    await vi.waitFor(
      async () =>
        expect(
          (await nodeHistory(dirs[0]!, "tick", cluster.env)).filter((run) => Date.parse(run.scheduledAt) > resumed && run.status === "ok")
            .length,
        ).toBeGreaterThanOrEqual(3),
      { timeout: 30_000, interval: 500 },
    );
    expect(await Promise.all(cluster.daemons.map((daemon) => stopDaemon(daemon)))).toEqual([0, 0, 0]);
    cluster.daemons = [];

    const [runs, ...others] = await Promise.all(dirs.map((dir) => nodeHistory(dir, "tick", cluster.env)));
    for (const other of others) expect(other.map((run) => run.id).sort()).toEqual(runs!.map((run) => run.id).sort());
    // A slot due after the pause was written (its fire reads the state just before it runs): skipped, on whichever node took it.
    const whilePaused = runs!.filter((run) => Date.parse(run.scheduledAt) > paused && Date.parse(run.scheduledAt) <= resumeAsked);
    expect(whilePaused.length).toBeGreaterThanOrEqual(4);
    for (const run of whilePaused) expect(run).toMatchObject({ status: "skipped", error: "paused" });
    expect(new Set(whilePaused.map((run) => run.scheduledAt)).size).toBe(whilePaused.length);
    // No run started anywhere for a slot after the pause; slots after the resume ran.
    expect(
      runs!.filter((run) => run.status !== "skipped" && Date.parse(run.scheduledAt) > paused && Date.parse(run.scheduledAt) <= resumeAsked),
    ).toEqual([]);
    const afterResume = runs!.filter((run) => Date.parse(run.scheduledAt) > resumed);
    for (const run of afterResume) expect(run.status).toBe("ok");
    process.stderr.write(
      `cluster pause: ${whilePaused.length} slots skipped while paused (by node: ${NODES.map((node) => `${node} ${whilePaused.filter((run) => run.node === node).length}`).join(", ")}), ${afterResume.length} run after the resume\n`,
    );
  });
});
