import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { RedisRunHistory } from "../../src/cluster/run-history.js";
import { emptyUsage } from "../../src/providers/types.js";
import { Runner } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { RUNS_KEPT_PER_JOB } from "../../src/store/run-history.js";
import { StateStore } from "../../src/store/state.js";
import { startRedis } from "../support/redis-server.js";
import { finalRecord, fire, makeJob } from "../support/runner-jobs.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const record = (job: string, id: string, startedAt: string, extra: Partial<RunRecord> = {}): RunRecord => ({
  id,
  job,
  reason: "schedule",
  scheduledAt: startedAt,
  startedAt,
  status: "running",
  iterations: 0,
  toolCalls: 0,
  usage: emptyUsage(),
  sessionId: `cron:${job}:${id}`,
  node: "n1",
  ...extra,
});

describe.skipIf(!hasRedis)("the cluster's run history in Redis", () => {
  const redis = useRedis();

  it("is the same for every daemon: a record saved by one is read by another, the last save of an id wins and keeps its place", async () => {
    const [one, two] = [new RedisRunHistory(await redis.connect()), new RedisRunHistory(await redis.connect())];
    await one.save("report", [record("report", "a", "2026-11-30T09:00:00.000Z")]);
    await two.save("report", [record("report", "b", "2026-11-30T09:00:02.000Z", { node: "n2" })]);
    await one.save("report", [record("report", "a", "2026-11-30T09:00:00.000Z", { status: "ok", finishedAt: "2026-11-30T09:00:01.000Z" })]);
    expect((await two.runs("report")).map((run) => [run.id, run.status, run.node])).toEqual([
      ["a", "ok", "n1"],
      ["b", "running", "n2"],
    ]);
    expect(await one.jobs()).toContain("report");
    expect([...two.loadedIds("report")].sort()).toEqual(["a", "b"]);
  });

  it("keeps the newest RUNS_KEPT_PER_JOB runs of a job", async () => {
    const history = new RedisRunHistory(await redis.connect());
    const start = Date.parse("2026-12-01T00:00:00Z");
    const runs = Array.from({ length: RUNS_KEPT_PER_JOB + 5 }, (_, i) => record("busy", `r${i}`, new Date(start + i * 1000).toISOString()));
    for (const run of runs) await history.save("busy", [run]);
    const kept = await history.runs("busy");
    expect(kept).toHaveLength(RUNS_KEPT_PER_JOB);
    expect(kept[0]!.id).toBe("r5");
    expect(kept.at(-1)!.id).toBe(`r${RUNS_KEPT_PER_JOB + 4}`);
  });

  it("skips a record that does not fit, and reads the rest", async () => {
    const client = await redis.connect();
    const history = new RedisRunHistory(client);
    await history.save("mixed", [record("mixed", "good", "2026-12-01T00:00:01.000Z")]);
    await client.hset("countd:history:mixed", "bad", "{not json");
    await client.zadd("countd:history:mixed:order", 0, "bad");
    expect((await history.runs("mixed")).map((run) => run.id)).toEqual(["good"]);
  });

  it("survives an outage: a record that could not be saved while Redis was away is saved once it is back", async () => {
    const away = await startRedis();
    const client = await redis.connect("records", away.url);
    const state = await StateStore.open(await mkdtemp(join(tmpdir(), "countd-cluster-state-")), { history: new RedisRunHistory(client) });
    let finish!: () => void;
    const finishing = new Promise<void>((resolve) => (finish = resolve));
    const runner = new Runner({
      job: (name) => makeJob(name),
      records: new RunSaver(state),
      concurrency: 1,
      node: "n1",
      execute: async () => {
        await finishing;
        return { answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() };
      },
    });
    const ended = finalRecord(runner, fire("outage"));
    await vi.waitFor(async () =>
      expect(await new RedisRunHistory(await redis.connect("records", away.url)).runs("outage")).toHaveLength(1),
    );
    await away.stop();
    finish();
    const end = await ended;
    expect(end).toMatchObject({ status: "ok", node: "n1" });

    const back = await startRedis([], { port: away.port });
    try {
      await vi.waitFor(
        async () =>
          expect((await new RedisRunHistory(await redis.connect("records", back.url)).runs("outage")).map((run) => run.status)).toEqual([
            "ok",
          ]),
        {
          timeout: 15_000,
          interval: 250,
        },
      );
      await runner.shutdown(0);
      await state.close();
    } finally {
      await back.stop();
    }
  });
});
