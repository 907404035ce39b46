import { access } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunView } from "../../src/console/protocol.js";
import { countdIn, spawnCountd, startDaemon, type CountdProcess } from "../support/cli-daemon.js";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import {
  checkInFixtures,
  expectWholeCancelled,
  expectWholeCheckIn,
  HEARTBEAT_LINES,
  expectWholeWork,
  journalFixtures,
  MCP_LINE,
  removeOtherRecords,
  SLOW_JOB,
  WORK_JOB,
  writeNotes,
} from "../support/journal-runs.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Two daemons, each a `countd start` process in a folder of its own, share one real redis-server.
 * Node n1 runs a job with tools, MCP tools, a failed tool call and a subagent, a job that n2
 * cancels mid-command, and a heartbeat check-in. Then both nodes' session files, audit logs and tool history are removed,
 * and `countd show` on n2 (through its daemon's console API, and with no daemon) shows every step
 * of n1's runs from the journals n1 stored in Redis.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);
const WAIT = { timeout: 60_000, interval: 250 };

describe.skipIf(!hasRedis)("run journals in a cluster", { timeout: 180_000 }, () => {
  const cluster = useCluster();
  let commands: CountdProcess[] = [];

  afterEach(async (context) => {
    if (context.task.result?.state === "fail")
      for (const daemon of cluster.daemons) process.stderr.write(`--- node:\n${daemon.output().slice(-6_000)}\n`);
    for (const command of commands) if (command.child.exitCode === null) command.child.kill("SIGINT");
    await Promise.all(commands.map((command) => command.closed));
    commands = [];
    await cluster.stopDaemons();
  });

  it("another node shows every step of a node's runs from their journals alone", async () => {
    journalFixtures(cluster.mock);
    checkInFixtures(cluster.mock);
    const dirs = await Promise.all(
      ["n1", "n2"].map((node) => nodeFolder(cluster.redis.url, node, { work: WORK_JOB, slow: SLOW_JOB }, [MCP_LINE, ...HEARTBEAT_LINES])),
    );
    for (const dir of dirs) await writeNotes(join(dir, "workspace"));
    const [a, b] = dirs as [string, string];
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    const onA = countdIn(a, cluster.env);
    const onB = countdIn(b, cluster.env);

    expect(await onA(["run", "work"])).toMatchObject({ code: 0 });
    const slow = spawnCountd(a, cluster.env, ["run", "slow"]);
    commands.push(slow);
    await vi.waitFor(() => access(join(a, "workspace", "started")), WAIT);
    const running = (await nodeHistory(b, "slow", cluster.env)).find((run) => run.status === "running")!;
    expect(await onB(["cancel", running.id])).toMatchObject({ code: 0 });
    await slow.closed;

    // The check-in asked for by hand on n1, as its schedule would on whichever node takes the slot.
    const beat = await onA(["run", "@heartbeat"]);
    expect(beat, beat.stderr).toMatchObject({ code: 0 });
    const [work] = await nodeHistory(b, "work", cluster.env);
    expect(work).toMatchObject({ status: "ok", node: "n1" });
    const [checkIn] = await nodeHistory(b, "@heartbeat", cluster.env);
    expect(checkIn).toMatchObject({ status: "ok", node: "n1" });
    for (const dir of dirs) await removeOtherRecords(dir);

    const show = async (id: string): Promise<RunView> => {
      const shown = await onB(["show", id, "--json"]);
      expect(shown, shown.stderr).toMatchObject({ code: 0 });
      return JSON.parse(shown.stdout) as RunView;
    };
    // Through n2's daemon, whose console API the run page draws.
    await vi.waitFor(async () => expectWholeWork(await show(work!.id)), WAIT);
    await vi.waitFor(async () => expectWholeCancelled(await show(running.id)), WAIT);
    await vi.waitFor(async () => expectWholeCheckIn(await show(checkIn!.id)), WAIT);

    // With no daemon: n2's `countd show` reads Redis.
    await cluster.stopDaemons();
    expectWholeWork(await show(work!.id));
    expectWholeCancelled(await show(running.id));
    expectWholeCheckIn(await show(checkIn!.id));
  });
});
