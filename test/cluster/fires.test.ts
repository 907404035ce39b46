import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ClusterFires, slotId } from "../../src/cluster/fires.js";
import { RedisRunHistory } from "../../src/cluster/run-history.js";
import type { OverlapPolicy } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { Requested, RunEnd, RunOptions } from "../../src/runner/requests.js";
import type { FireRequest } from "../../src/runner/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { makeJob } from "../support/runner-jobs.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

/** A daemon's side of the cluster's fires, with a runner whose runs end when the test says. */
interface Node {
  fires: ClusterFires;
  /** Its connection to Redis. */
  client: Redis;
  started: FireRequest[];
  skipped: FireRequest[];
  /** Ends the run of this slot. */
  end(scheduledAt: Date): void;
}

const at = (second: number) => new Date(Date.UTC(2026, 10, 30, 9, 0, second));
const fire = (job: string, second: number): FireRequest => ({ job, reason: "schedule", scheduledAt: at(second) });
/** What a stand-in runner answers: the fire waits, and ends as `ended` does. */
const requested = (ended: Promise<RunEnd>): Requested => ({ decision: "queued", started: Promise.resolve(undefined), ended });

describe.skipIf(!hasRedis)("the cluster's fires (two daemons, one Redis)", () => {
  const redis = useRedis();
  let nodes: Node[] = [];
  afterEach(async () => {
    for (const node of nodes) for (const request of node.started) node.end(request.scheduledAt);
    await Promise.all(nodes.map((node) => node.fires.stop(async () => {})));
    nodes = [];
    const flush = await redis.connect("probe");
    await flush.flushall();
  });

  async function node(overlap: OverlapPolicy, concurrency = 2): Promise<Node> {
    const client = await redis.connect("queues");
    const ends = new Map<number, () => void>();
    const started: FireRequest[] = [];
    const skipped: FireRequest[] = [];
    const runner = {
      request: (request: FireRequest, opts?: RunOptions) => {
        if (opts?.skipped) {
          skipped.push(request);
          return requested(Promise.resolve({} as RunEnd));
        }
        return requested(
          new Promise<RunEnd>((resolve) => {
            started.push(request);
            ends.set(request.scheduledAt.getTime(), () => resolve({} as RunEnd));
          }),
        );
      },
    };
    const fires = new ClusterFires({
      redis: client,
      runner,
      job: (name) => makeJob(name, { overlap }),
      concurrency,
      node: `n${nodes.length + 1}`,
      history: new RedisRunHistory(client),
      state: { refresh: async () => {} },
    });
    const made: Node = { fires, client, started, skipped, end: (scheduledAt) => ends.get(scheduledAt.getTime())?.() };
    nodes.push(made);
    return made;
  }

  // The slots, in time order, whichever node took each.
  const seconds = (requests: FireRequest[]) => requests.map((request) => request.scheduledAt.getUTCSeconds()).sort((x, y) => x - y);
  const allStarted = () => seconds(nodes.flatMap((node) => node.started));
  const allSkipped = () => seconds(nodes.flatMap((node) => node.skipped));
  const endEverywhere = (second: number) => nodes.forEach((node) => node.end(at(second)));
  /** Waits until BullMQ has the fire of `job`'s slot at `second` completed: its run ended, or it was not run. */
  const completed = async (job: string, second: number) => {
    const runs = new Queue("runs", { connection: nodes[0]!.client, prefix: "countd" });
    await vi.waitFor(async () => expect(await runs.getJobState(slotId(job, at(second)))).toBe("completed"));
  };

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
    // A slot due in the moment the run is still being marked done would be skipped too.
    await completed("report", 0);
    a.fires.fire(fire("report", 4));
    await vi.waitFor(() => expect(allStarted()).toEqual([0, 4]));
    expect(allSkipped()).toEqual([2]);
  });

  it("skip: a slot recorded skipped is not run when a daemon whose timer fired late adds it after the run ended", async () => {
    const [a, b] = [await node("skip"), await node("skip")];
    a.fires.fire(fire("report", 0));
    await vi.waitFor(() => expect(allStarted()).toEqual([0]));
    a.fires.fire(fire("report", 2));
    await vi.waitFor(() => expect(allSkipped()).toEqual([2]));
    endEverywhere(0);
    await completed("report", 0);
    b.fires.fire(fire("report", 2));
    await completed("report", 2);
    expect(allStarted()).toEqual([0]);
    expect(allSkipped()).toEqual([2]);
  });

  it("skip: a slot run by a daemon that added it late, while another's record of the skip was on its way, is run and not also recorded skipped", async () => {
    const [a, b] = [await node("skip"), await node("skip")];
    a.fires.fire(fire("report", 0));
    await vi.waitFor(() => expect(allStarted()).toEqual([0]));
    // a's claim of the skip reaches Redis only once b's late add of the slot was taken and started.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const set = a.client.set.bind(a.client) as (...args: unknown[]) => Promise<unknown>;
    let claimed: Promise<unknown> | undefined;
    vi.spyOn(a.client, "set").mockImplementation(((...args: unknown[]) => {
      if (claimed || !String(args[0]).startsWith("countd:fires:")) return set(...args);
      claimed = released.then(() => set(...args));
      return claimed;
    }) as typeof a.client.set);
    a.fires.fire(fire("report", 2));
    await vi.waitFor(() => expect(claimed).toBeDefined());
    endEverywhere(0);
    await completed("report", 0);
    b.fires.fire(fire("report", 2));
    await vi.waitFor(() => expect(allStarted()).toEqual([0, 2]));
    release();
    await claimed;
    // Time for a's decision to follow its claim: a skip would be recorded at once.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(allSkipped()).toEqual([]);
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

  it("each daemon takes the fires due at once up to its runner.concurrency, and the other daemon the rest", async () => {
    const [a, b] = [await node("allow", 3), await node("allow", 3)];
    for (const daemon of [a, b]) for (const job of ["j1", "j2", "j3", "j4", "j5"]) daemon.fires.fire(fire(job, 0));
    await vi.waitFor(() => expect(a.started.length + b.started.length).toBe(5));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(a.started.length + b.started.length).toBe(5);
    expect(Math.max(a.started.length, b.started.length)).toBe(3);
  });

  it("allow: runs of one job may run on both daemons at once", async () => {
    await node("allow");
    await node("allow");
    nodes[0]!.fires.fire(fire("scan", 0));
    nodes[1]!.fires.fire(fire("scan", 2));
    await vi.waitFor(() => expect(allStarted().sort()).toEqual([0, 2]));
  });
});

describe.skipIf(!hasRedis)("the cluster's fires: a run a daemon left (its hold expired)", () => {
  const redis = useRedis();
  let fires: ClusterFires | undefined;
  let queue: Queue | undefined;
  afterEach(async () => {
    await fires?.stop(async () => {});
    await queue?.close();
    const flush = await redis.connect("probe");
    await flush.flushall();
  });

  const left = { id: "20261130T090000Z-dead", node: "n9" };
  const running = (attempt: number): RunRecord => ({
    id: left.id,
    job: "report",
    reason: attempt > 1 ? "retry" : "schedule",
    scheduledAt: at(0).toISOString(),
    startedAt: at(1).toISOString(),
    status: "running",
    iterations: 0,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `report/${left.id}`,
    node: left.node,
    attempt,
  });

  /**
   * A fire in `runs` as a daemon that lost its hold leaves it (its run noted, its record `running`
   * in the history), taken by a daemon whose job has `attempts`: what that daemon starts and reports.
   */
  async function takeOver(attempts: number, run: { attempt: number; ended?: RunRecord["status"] }, saved: RunRecord["status"] = "running") {
    const client = await redis.connect("queues");
    const history = new RedisRunHistory(client);
    await history.save("report", [{ ...running(run.attempt), status: saved }]);
    const runs = (queue = new Queue("runs", { connection: client, prefix: "countd" }));
    await runs.add(
      "report",
      { job: "report", reason: "schedule", scheduledAt: at(0).toISOString(), run: { ...left, ...run } },
      { jobId: slotId("report", at(0)) },
    );
    const started: Array<{ request: FireRequest; opts: RunOptions | undefined }> = [];
    const reported: RunRecord[] = [];
    const runner = {
      request: (request: FireRequest, opts?: RunOptions) => {
        started.push({ request, opts });
        return requested(Promise.resolve({} as RunEnd));
      },
    };
    fires = new ClusterFires({
      redis: client,
      runner,
      job: (name) => makeJob(name, { retry: { attempts, backoffMs: 1_000 } }),
      concurrency: 1,
      node: "n1",
      history,
      state: { refresh: async () => {} },
      interrupted: async (_job, record) => void reported.push(record),
    });
    await vi.waitFor(async () => expect(await runs.getJobState(slotId("report", at(0)))).toBe("completed"));
    return { started, reported, record: (await history.runs("report"))[0]! };
  }

  it("left mid-run with an attempt to spare: recorded interrupted with its node, run again as attempt 2 after the backoff, not reported", async () => {
    const { started, reported, record } = await takeOver(2, { attempt: 1 });
    expect(record).toMatchObject({ status: "interrupted", node: "n9", error: "node n9 stopped while this run was in progress" });
    expect(started).toHaveLength(1);
    expect(started[0]!.request).toMatchObject({ job: "report", reason: "retry" });
    expect(started[0]!.opts).toMatchObject({ attempt: 2, retry: { of: left.id, backoffMs: 1_000 } });
    expect(reported).toEqual([]);
  });

  it("left mid-run at its last attempt: recorded interrupted, not run again, reported", async () => {
    const { started, reported, record } = await takeOver(2, { attempt: 2 });
    expect(record).toMatchObject({ status: "interrupted", node: "n9" });
    expect(started).toEqual([]);
    expect(reported).toEqual([record]);
  });

  it("left after it ended and queued its deliveries: recorded interrupted, run again only if it failed and an attempt is spare, never reported", async () => {
    const ok = await takeOver(3, { attempt: 1, ended: "ok" });
    expect(ok.record).toMatchObject({
      status: "interrupted",
      error: "node n9 stopped after this run ended (ok) and queued its deliveries, before its record was saved",
    });
    expect(ok.started).toEqual([]);
    expect(ok.reported).toEqual([]);
  });

  it("left during the backoff after a failed attempt: run again as the next attempt", async () => {
    const { started, reported, record } = await takeOver(3, { attempt: 1, ended: "error" }, "error");
    expect(record.status).toBe("error");
    expect(started.map(({ opts }) => opts?.attempt)).toEqual([2]);
    expect(reported).toEqual([]);
  });
});
