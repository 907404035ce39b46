import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ClusterFires, slotId } from "../../src/cluster/fires.js";
import { connectRedis } from "../../src/cluster/redis.js";
import type { OverlapPolicy } from "../../src/jobs/types.js";
import type { RunEnd } from "../../src/runner/runner.js";
import type { FireRequest } from "../../src/runner/types.js";
import { startRedis, type RedisServer } from "../support/redis-server.js";
import { makeJob } from "../support/runner-jobs.js";
import { hasSystemPackage } from "../support/system-package.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

/** A daemon's side of the cluster's fires, with a runner whose runs end when the test says. */
interface Node {
  fires: ClusterFires;
  started: FireRequest[];
  skipped: FireRequest[];
  /** Ends the run of this slot. */
  end(scheduledAt: Date): void;
}

const at = (second: number) => new Date(Date.UTC(2026, 10, 30, 9, 0, second));
const fire = (job: string, second: number): FireRequest => ({ job, reason: "schedule", scheduledAt: at(second) });

describe.skipIf(!hasRedis)("the cluster's fires (two daemons, one Redis)", () => {
  let redis: RedisServer;
  let clients: Redis[] = [];
  let nodes: Node[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  afterEach(async () => {
    for (const node of nodes) for (const request of node.started) node.end(request.scheduledAt);
    await Promise.all(nodes.map((node) => node.fires.stop(async () => {})));
    for (const client of clients) client.disconnect();
    [nodes, clients] = [[], []];
    const flush = await connectRedis(redis.url, "probe", { name: "flush" });
    await flush.flushall();
    flush.disconnect();
  });

  async function node(overlap: OverlapPolicy): Promise<Node> {
    const client = await connectRedis(redis.url, "queues", { name: "countd-test" });
    clients.push(client);
    const ends = new Map<number, () => void>();
    const started: FireRequest[] = [];
    const skipped: FireRequest[] = [];
    const runner = {
      runToEnd: (request: FireRequest) =>
        new Promise<RunEnd>((resolve) => {
          started.push(request);
          ends.set(request.scheduledAt.getTime(), () => resolve({} as RunEnd));
        }),
      skip: (request: FireRequest) => void skipped.push(request),
    };
    const fires = new ClusterFires({ redis: client, runner, job: (name) => makeJob(name, { overlap }), concurrency: 2 });
    const made: Node = { fires, started, skipped, end: (scheduledAt) => ends.get(scheduledAt.getTime())?.() };
    nodes.push(made);
    return made;
  }

  const allStarted = () => nodes.flatMap((node) => node.started.map((request) => request.scheduledAt.getUTCSeconds()));
  const allSkipped = () => nodes.flatMap((node) => node.skipped.map((request) => request.scheduledAt.getUTCSeconds()));
  const endEverywhere = (second: number) => nodes.forEach((node) => node.end(at(second)));

  it("names a slot by job and time without a colon, which BullMQ refuses in an id", () => {
    expect(slotId("daily-report", new Date("2026-11-30T09:00:00Z"))).toBe("daily-report@20261130T090000.000Z");
  });

  it("runs a slot both daemons add once", async () => {
    const [a, b] = [await node("allow"), await node("allow")];
    a.fires.fire(fire("tick", 0));
    b.fires.fire(fire("tick", 0));
    await vi.waitFor(() => expect(allStarted()).toEqual([0]));
    endEverywhere(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(allStarted()).toEqual([0]);
  });

  it("skip: a slot due while the job runs on either daemon is skipped, once", async () => {
    const [a, b] = [await node("skip"), await node("skip")];
    a.fires.fire(fire("report", 0));
    await vi.waitFor(() => expect(allStarted()).toEqual([0]));
    a.fires.fire(fire("report", 2));
    b.fires.fire(fire("report", 2));
    await vi.waitFor(() => expect(allSkipped()).toEqual([2]));
    endEverywhere(0);
    a.fires.fire(fire("report", 4));
    await vi.waitFor(() => expect(allStarted()).toEqual([0, 4]));
    expect(allSkipped()).toEqual([2]);
  });

  it("queue: slots due while the job runs wait as one, the newest, which runs when the run ends", async () => {
    const [a, b] = [await node("queue"), await node("queue")];
    a.fires.fire(fire("digest", 0));
    await vi.waitFor(() => expect(allStarted()).toEqual([0]));
    a.fires.fire(fire("digest", 2));
    await new Promise((resolve) => setTimeout(resolve, 200));
    b.fires.fire(fire("digest", 4));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(allStarted()).toEqual([0]);
    endEverywhere(0);
    await vi.waitFor(() => expect(allStarted()).toEqual([0, 4]));
    expect(allSkipped()).toEqual([]);
  });

  it("allow: runs of one job may run on both daemons at once", async () => {
    await node("allow");
    await node("allow");
    nodes[0]!.fires.fire(fire("scan", 0));
    nodes[1]!.fires.fire(fire("scan", 2));
    await vi.waitFor(() => expect(allStarted().sort()).toEqual([0, 2]));
  });
});
