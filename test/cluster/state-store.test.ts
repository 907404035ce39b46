import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { withBackend } from "../../src/backend/open.js";
import type { Config } from "../../src/config/schema.js";
import { RedisSharedState } from "../../src/cluster/shared-state.js";
import { StateStore } from "../../src/store/state.js";
import { nodeFolder } from "../support/cluster-nodes.js";
import { captureLog } from "../support/log-capture.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

/** What `countd ask` does once answered, through the backend countd.yaml names. */
const recordExchange = (config: Config, at: Date) => withBackend(config, (backend) => backend.recordExchange(at));

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

describe.skipIf(!hasRedis)("the cluster's shared state in Redis", () => {
  const redis = useRedis();
  afterEach(async () => {
    const flush = await redis.connect();
    await flush.flushdb();
  });

  /** A daemon's view: a state directory of its own, the shared state in Redis through two connections of its own. */
  async function daemonState(opts: { log?: Logger } = {}): Promise<StateStore> {
    const shared = await RedisSharedState.open(await redis.connect(), { subscriber: await redis.connect(), ...opts });
    return StateStore.open(await mkdtemp(join(tmpdir(), "countd-node-")), { shared });
  }

  it("loses no change when two daemons change it at once, each on the copy it had", async () => {
    const [one, two] = [await daemonState(), await daemonState()];
    const changes: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) {
      changes.push(one.update((data) => void (data.jobs[`one-${i}`] = { lastScheduledAt: new Date(i * 1000).toISOString() })));
      changes.push(
        two.update((data) => {
          const streak = data.jobs["shared"]?.failing;
          data.jobs["shared"] = {
            failing: {
              since: "2026-12-01T00:00:00.000Z",
              failures: (streak?.failures ?? 0) + 1,
              reportedAt: "2026-12-01T00:00:00.000Z",
              unreported: 0,
            },
          };
        }),
      );
      changes.push(
        one.update((data) => {
          const streak = data.jobs["shared"]?.failing;
          data.jobs["shared"] = {
            failing: {
              since: "2026-12-01T00:00:00.000Z",
              failures: (streak?.failures ?? 0) + 1,
              reportedAt: "2026-12-01T00:00:00.000Z",
              unreported: 0,
            },
          };
        }),
      );
    }
    await Promise.all(changes);
    const third = await daemonState();
    expect(third.job("shared").failing?.failures).toBe(100);
    expect(Object.keys(third.data.jobs).filter((name) => name.startsWith("one-"))).toHaveLength(50);
    // Each daemon's copy follows the other's changes.
    await vi.waitFor(() => expect(one.job("shared").failing?.failures).toBe(100));
    await vi.waitFor(() => expect(Object.keys(two.data.jobs)).toHaveLength(51));
  });

  it("a pause on one daemon is seen by another at once after refresh(), and followed without it", async () => {
    const [one, two] = [await daemonState(), await daemonState()];
    await one.pause("report");
    await two.refresh();
    expect(two.isPaused("report")).toBe(true);
    await two.resume(null);
    await one.refresh();
    expect(one.isPaused("report")).toBe(false);
    await one.pause(null, new Date("2026-12-01T10:00:00.000Z"));
    await vi.waitFor(() => expect(two.pausedAll()).toBe("2026-12-01T10:00:00.000Z"));
    expect(two.isPaused("anything")).toBe(true);
    // The running index stays each daemon's own (its state.json), out of Redis.
    expect(Object.keys(await (await redis.connect()).hgetall("countd:state:jobs"))).toEqual([]);
  });

  it("a thousand runs starting at once share their refreshes, and each still sees a pause made before it asked", async () => {
    // Neither follows the changes published, so only the refreshes read the state.
    const view = async () =>
      StateStore.open(await mkdtemp(join(tmpdir(), "countd-node-")), { shared: await RedisSharedState.open(await redis.connect()) });
    const [one, two] = [await view(), await view()];
    const stats = await redis.connect();
    const gets = async () => Number(/cmdstat_get:calls=(\d+)/.exec(await stats.info("commandstats"))?.[1] ?? 0);
    await one.pause("report");
    const before = await gets();
    await Promise.all(Array.from({ length: 1_000 }, () => two.refresh()));
    expect(two.isPaused("report")).toBe(true);
    // One look at the version, then one read of the state that changed (two GETs in it): not a look per run.
    expect((await gets()) - before).toBe(3);
    await one.resume("report");
    await two.refresh();
    expect(two.isPaused("report")).toBe(false);
  });

  it("a node that ran alone before joining keeps its jobs paused, its one-shots done and its last slots, once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-node-"));
    const alone = {
      jobs: {
        report: { pausedAt: "2026-11-20T08:00:00.000Z", lastScheduledAt: "2026-11-30T09:00:00.000Z" },
        launch: { done: true, lastScheduledAt: "2026-11-25T12:00:00.000Z" },
        digest: { lastScheduledAt: "2026-11-29T07:00:00.000Z" },
        "@heartbeat": { checkIns: { delivered: [{ at: "2026-11-30T10:00:00.000Z", hash: "abc" }] } },
      },
      running: { "report/20261130T090000Z-1a2b": { job: "report", id: "20261130T090000Z-1a2b" } },
      pausedAllAt: "2026-11-21T08:00:00.000Z",
    };
    await writeFile(join(dir, "state.json"), JSON.stringify(alone));
    // The cluster already saw a later slot of digest, and a pause of report made on another node.
    const other = await daemonState();
    await other.update((data) => {
      data.jobs["digest"] = { lastScheduledAt: "2026-11-30T07:00:00.000Z" };
      data.jobs["report"] = { pausedAt: "2026-11-10T08:00:00.000Z" };
    });
    const logs = captureLog();
    const node = await StateStore.open(dir, { shared: await RedisSharedState.open(await redis.connect()), log: logs.log });

    expect(node.data.jobs).toEqual({
      report: { pausedAt: "2026-11-10T08:00:00.000Z", lastScheduledAt: "2026-11-30T09:00:00.000Z" },
      launch: { done: true, lastScheduledAt: "2026-11-25T12:00:00.000Z" },
      digest: { lastScheduledAt: "2026-11-30T07:00:00.000Z" },
      "@heartbeat": alone.jobs["@heartbeat"],
    });
    expect(node.pausedAll()).toBe("2026-11-21T08:00:00.000Z");
    await vi.waitFor(() => expect(other.isPaused("digest")).toBe(true));
    expect(logs.lines).toContainEqual(
      expect.objectContaining({
        level: "info",
        msg: "handed the job state of state.json over to the shared state",
        fields: expect.objectContaining({ paused: ["report"], pausedAll: true }),
      }),
    );
    // state.json keeps the node's running index alone, so a pause lifted in the cluster is not brought back.
    expect(JSON.parse(await readFile(join(dir, "state.json"), "utf8"))).toEqual({
      jobs: {},
      running: alone.running,
    });
    await other.resume(null);
    await node.close();
    const again = await StateStore.open(dir, { shared: await RedisSharedState.open(await redis.connect()) });
    expect(again.isPaused("report")).toBe(false);
    expect(again.job("launch").done).toBe(true);
  });

  it("a change already so on a daemon's old copy is still written when the state moved on", async () => {
    // A command's view: read once, not followed.
    const stale = await StateStore.open(await mkdtemp(join(tmpdir(), "countd-node-")), {
      shared: await RedisSharedState.open(await redis.connect()),
    });
    const daemon = await daemonState();
    await stale.pause("report");
    await daemon.refresh();
    await daemon.resume("report");
    expect(stale.isPaused("report")).toBe(true);
    await stale.pause("report");
    await daemon.refresh();
    expect(daemon.isPaused("report")).toBe(true);
  });

  it("countd ask on any node is contact for every node's heartbeat: the last exchange is kept in @heartbeat's shared job state", async () => {
    const daemon = await daemonState();
    const config = await loadConfig({ file: join(await nodeFolder(redis.url, "n2", {}), "countd.yaml"), needs: [] });
    await recordExchange(config, new Date("2026-12-01T10:00:00.000Z"));
    await vi.waitFor(() => expect(daemon.job("@heartbeat").checkIns?.lastContactAt).toBe("2026-12-01T10:00:00.000Z"));
    // An older exchange does not move it back.
    await recordExchange(config, new Date("2026-12-01T09:00:00.000Z"));
    await daemon.refresh();
    expect(daemon.job("@heartbeat").checkIns?.lastContactAt).toBe("2026-12-01T10:00:00.000Z");
  });

  it("leaves out what does not fit, with a warning, and keeps the rest", async () => {
    const client = await redis.connect();
    await client.hset(
      "countd:state:jobs",
      "good",
      JSON.stringify({ pausedAt: "2026-12-01T10:00:00.000Z" }),
      "text",
      "not json",
      "bad",
      JSON.stringify({ pausedAt: 7 }),
    );
    await client.hset("countd:state:jobs", "@heartbeat", JSON.stringify({ checkIns: { delivered: "never" } }));
    const logs = captureLog();
    const state = await daemonState({ log: logs.log });
    expect(state.data.jobs).toEqual({ good: { pausedAt: "2026-12-01T10:00:00.000Z" } });
    expect(
      logs.lines
        .filter((line) => line.msg === "shared state in Redis does not fit; left out")
        .map((line) => line.fields["key"])
        .sort(),
    ).toEqual(["countd:state:jobs @heartbeat", "countd:state:jobs bad", "countd:state:jobs text"]);
  });
});
