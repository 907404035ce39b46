import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunOutcome } from "../../src/agent/outcome.js";
import { ClusterFires } from "../../src/cluster/fires.js";
import { RedisRunHistory } from "../../src/cluster/run-history.js";
import { RedisSharedState } from "../../src/cluster/shared-state.js";
import type { Job, OverlapPolicy } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import { decideOverlap, PAUSED, REPLACED, type Busy, type FireDecision } from "../../src/runner/overlap.js";
import { Runner } from "../../src/runner/runner.js";
import type { FireRequest, RunContext } from "../../src/runner/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { RunSaver } from "../../src/store/run-saver.js";
import { StateStore } from "../../src/store/state.js";
import { makeJob } from "../support/runner-jobs.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

/*
 * One table of what becomes of a fire that meets its job in some state, checked three times: by
 * the overlap decision alone, by a daemon's runner, and by two daemons sharing a Redis (the
 * cluster's queue in front of each daemon's runner). The same rule must hold on all three.
 */

/** What the job has when the fire comes: how each is set up is the same in every world. */
type Setup = "idle" | "running" | "running, one waiting" | "backing off" | "waiting for a slot";
type Outcome = "start" | "skip: busy" | "skip: paused" | "queue" | "replace" | "beside";

interface Case {
  overlap: OverlapPolicy;
  session: Job["session"];
  reason: "schedule" | "watch" | "manual";
  setup: Setup;
  paused?: boolean;
  expect: Outcome;
}

const TABLE: Case[] = [
  { overlap: "skip", session: "isolated", reason: "schedule", setup: "idle", expect: "start" },
  { overlap: "skip", session: "isolated", reason: "schedule", setup: "running", expect: "skip: busy" },
  { overlap: "skip", session: "isolated", reason: "schedule", setup: "backing off", expect: "skip: busy" },
  { overlap: "skip", session: "isolated", reason: "schedule", setup: "waiting for a slot", expect: "skip: busy" },
  { overlap: "skip", session: "isolated", reason: "manual", setup: "running", expect: "skip: busy" },
  { overlap: "skip", session: "isolated", reason: "watch", setup: "running", expect: "queue" },
  { overlap: "queue", session: "isolated", reason: "schedule", setup: "running", expect: "queue" },
  { overlap: "queue", session: "isolated", reason: "schedule", setup: "running, one waiting", expect: "queue" },
  { overlap: "queue", session: "isolated", reason: "schedule", setup: "backing off", expect: "queue" },
  { overlap: "replace", session: "isolated", reason: "schedule", setup: "running", expect: "replace" },
  { overlap: "replace", session: "isolated", reason: "schedule", setup: "running, one waiting", expect: "replace" },
  { overlap: "replace", session: "isolated", reason: "schedule", setup: "backing off", expect: "replace" },
  { overlap: "allow", session: "isolated", reason: "schedule", setup: "running", expect: "beside" },
  { overlap: "allow", session: "shared", reason: "schedule", setup: "running", expect: "queue" },
  { overlap: "allow", session: "shared", reason: "watch", setup: "running", expect: "queue" },
  { overlap: "skip", session: "isolated", reason: "schedule", setup: "idle", paused: true, expect: "skip: paused" },
  { overlap: "skip", session: "isolated", reason: "manual", setup: "idle", paused: true, expect: "start" },
  { overlap: "queue", session: "isolated", reason: "watch", setup: "idle", paused: true, expect: "skip: paused" },
  { overlap: "queue", session: "isolated", reason: "schedule", setup: "running", paused: true, expect: "skip: paused" },
];

const name = (c: Case) => `${c.overlap}, ${c.session} session, ${c.reason} fire, ${c.setup}${c.paused ? ", paused" : ""} → ${c.expect}`;

/** The skip's text, by who found the job busy. */
const BUSY_TEXT = {
  daemon: "a run of this job was still in progress (overlap: skip)",
  cluster: "a run of this job was waiting or in progress in the cluster (overlap: skip)",
};

const at = (second: number) => new Date(Date.UTC(2026, 10, 30, 9, 0, second));
/** The busy fire, the one waiting behind it, and the fire the row is about. */
const BUSY_AT = 0;
const WAITING_AT = 2;
const FIRE_AT = 4;
const BACKOFF_MS = 2_000;

function asDecided(c: Case): Outcome {
  const busy: Busy =
    c.setup === "idle" ? "idle" : c.setup === "backing off" ? "backing off" : c.setup === "waiting for a slot" ? "waiting" : "running";
  const decision: FireDecision = decideOverlap({
    job: { overlap: c.overlap, session: c.session },
    fire: { reason: c.reason, manual: c.reason === "manual" },
    paused: c.paused ?? false,
    busy,
  });
  if (decision.does === "skip") return decision.why === PAUSED ? "skip: paused" : "skip: busy";
  return decision.does;
}

describe("the overlap decision", () => {
  it.each(TABLE.map((c) => [name(c), c] as const))("%s", (_, c) => {
    expect(asDecided(c)).toBe(c.expect);
  });
});

/** One executor call, held until the world ends it. */
interface Held {
  job: string;
  scheduledAt: number;
  /** Another run of its job was in progress as this one began. */
  beside: boolean;
  end(outcome?: Partial<RunOutcome>): void;
  ended: boolean;
}

/** The executor of every runner in a world: runs are held until the test ends them. */
function heldRuns() {
  const calls: Held[] = [];
  const execute = (job: Job, run: RunContext) =>
    new Promise<RunOutcome>((resolve) => {
      const call: Held = {
        job: job.name,
        scheduledAt: run.request.scheduledAt.getTime(),
        beside: calls.some((other) => other.job === job.name && !other.ended),
        ended: false,
        end: (outcome = {}) => {
          if (call.ended) return;
          call.ended = true;
          resolve({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage(), ...outcome });
        },
      };
      run.cancel.signal.addEventListener("abort", () => call.end({ answer: "", status: "cancelled" }));
      calls.push(call);
    });
  return { calls, execute };
}

/** Daemons as a row sees them: it fires, pauses, and reads what became of the job's fires. */
interface World {
  where: "daemon" | "cluster";
  calls: Held[];
  /** Hands a fire on as a daemon's trigger would (in a cluster, through the queue). */
  fire(request: FireRequest): void;
  pause(job: string): Promise<void>;
  /** Nothing runs or waits on any daemon. */
  quiet(): Promise<boolean>;
  records(job: string): Promise<readonly RunRecord[]>;
}

const JOB = "job";
const BLOCKER = "blocker";
/** A run of each slot of the blocker, one per run slot of the world, keep every slot taken. */
const SLOTS = 2;

function jobOf(c: Case): (job: string) => Job | undefined {
  const backoff = c.setup === "backing off" ? { retry: { attempts: 2, backoffMs: BACKOFF_MS } } : {};
  return (job) =>
    job === BLOCKER
      ? makeJob(BLOCKER, { overlap: "allow" })
      : job === JOB
        ? makeJob(JOB, { overlap: c.overlap, session: c.session, ...backoff })
        : undefined;
}

const running = (world: World, second: number) =>
  vi.waitFor(() => expect(world.calls.some((call) => call.scheduledAt === at(second).getTime() && !call.ended)).toBe(true), {
    timeout: 10_000,
  });

/** Brings the job into the row's state, fires the row's fire, lets every run end, and says what became of the fire. */
async function play(world: World, c: Case): Promise<Outcome> {
  const fire = (second: number, reason: FireRequest["reason"] = "schedule", job = JOB) =>
    world.fire({ job, reason, scheduledAt: at(second), ...(reason === "watch" ? { files: [`/in/${second}.csv`] } : {}) });
  if (c.setup === "waiting for a slot") {
    for (let slot = 0; slot < SLOTS; slot++) fire(10 + slot, "schedule", BLOCKER);
    await vi.waitFor(() => expect(world.calls.filter((call) => call.job === BLOCKER)).toHaveLength(SLOTS), { timeout: 10_000 });
    fire(BUSY_AT);
    // Long enough for a daemon to have started it, had a slot been free.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(world.calls.filter((call) => call.job === JOB)).toEqual([]);
  } else if (c.setup !== "idle") {
    fire(BUSY_AT);
    await running(world, BUSY_AT);
  }
  if (c.setup === "running, one waiting") {
    fire(WAITING_AT);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  if (c.setup === "backing off") {
    world.calls.find((call) => call.job === JOB)!.end({ answer: "", status: "error", error: "upstream exploded" });
    await vi.waitFor(async () => expect((await world.records(JOB)).map((run) => run.status)).toContain("error"), { timeout: 10_000 });
  }
  if (c.paused) await world.pause(JOB);
  fire(FIRE_AT, c.reason);
  // Time for the fire to be decided: the cluster's queue adds it on the next turn, and records a skip after.
  await new Promise((resolve) => setTimeout(resolve, 500));

  // Every run ends once started, until nothing runs or waits anywhere.
  await vi.waitFor(
    async () => {
      for (const call of world.calls) call.end();
      expect(await world.quiet()).toBe(true);
    },
    { timeout: 20_000, interval: 200 },
  );
  const records = await world.records(JOB);
  const mine = records.find((run) => run.scheduledAt === at(FIRE_AT).toISOString());
  if (mine?.status === "skipped") {
    if (mine.error === PAUSED) return "skip: paused";
    expect(mine.error).toBe(BUSY_TEXT[world.where]);
    return "skip: busy";
  }
  if (records.some((run) => run.status === "cancelled" && run.error === REPLACED)) return "replace";
  const call = world.calls.find((held) => held.job === JOB && held.scheduledAt === at(FIRE_AT).getTime());
  if (call?.beside) return "beside";
  if (c.setup === "idle") {
    expect(mine).toMatchObject({ status: "ok" });
    return "start";
  }
  // Run after the job's run ended, on its own or as the one fire waiting behind it.
  expect(records.filter((run) => run.status === "ok").length).toBeGreaterThanOrEqual(2);
  return "queue";
}

describe("the overlap table on a daemon's runner", () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  async function daemon(c: Case): Promise<World> {
    const state = await StateStore.open(await mkdtemp(join(tmpdir(), "countd-overlap-")));
    const { calls, execute } = heldRuns();
    const runner = new Runner({
      job: jobOf(c),
      records: new RunSaver(state),
      execute,
      concurrency: SLOTS,
      paused: (job) => state.isPaused(job),
    });
    close = async () => {
      for (const call of calls) call.end();
      await runner.shutdown(0);
      await state.close();
    };
    return {
      where: "daemon",
      calls,
      fire: (request) => void runner.request(request),
      pause: (job) => state.pause(job),
      quiet: async () => runner.active() === 0 && runner.queued().length === 0,
      records: (job) => state.runs(job),
    };
  }

  it.each(TABLE.map((c) => [name(c), c] as const))("%s", async (_, c) => {
    expect(await play(await daemon(c), c)).toBe(c.expect);
  });
});

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

/**
 * The cluster's queue takes cron fires only (daemon.ts): watch, webhook and manual fires go to the
 * runner of the daemon they reach, which the daemon's table above covers.
 */
const QUEUED_BY_THE_CLUSTER = TABLE.filter((c) => c.reason === "schedule");

describe.skipIf(!hasRedis)("the overlap table on two daemons sharing a Redis", () => {
  const redis = useRedis();
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
    await (await redis.connect("probe")).flushall();
  });

  async function cluster(c: Case): Promise<World> {
    const { calls, execute } = heldRuns();
    const job = jobOf(c);
    const nodes = await Promise.all(
      ["n1", "n2"].map(async (node) => {
        const queues = await redis.connect("queues");
        const records = await redis.connect("records");
        const shared = await RedisSharedState.open(records);
        const history = new RedisRunHistory(records);
        const state = await StateStore.open(await mkdtemp(join(tmpdir(), `countd-overlap-${node}-`)), { history, shared });
        const runner = new Runner({
          job,
          records: new RunSaver(state),
          execute,
          concurrency: 1,
          node,
          paused: (name) => state.isPaused(name),
        });
        return { node, queues, state, history, runner };
      }),
    );
    const fires = nodes.map(
      ({ node, queues, state, history, runner }) =>
        new ClusterFires({
          redis: queues,
          runner,
          job,
          concurrency: 1,
          node,
          history,
          state,
          // As view.ts does: the cancel goes to the daemon holding the run.
          replace: (run, why) => nodes.find((other) => other.node === run.node)?.runner.cancel(run.id, why),
        }),
    );
    const runs = new Queue("runs", { connection: nodes[0]!.queues, prefix: "countd" });
    close = async () => {
      for (const call of calls) call.end();
      await Promise.all(fires.map((each, i) => each.stop(() => nodes[i]!.runner.shutdown(0))));
      await runs.close();
      await Promise.all(nodes.map(({ state }) => state.close()));
    };
    let next = 0;
    return {
      where: "cluster",
      calls,
      // Every daemon's timer adds each slot; the first daemon's and the other's alternately go first.
      fire: (request) => {
        const order = next++ % 2 === 0 ? fires : [...fires].reverse();
        for (const each of order) each.fire(request);
      },
      pause: (name) => nodes[0]!.state.pause(name),
      quiet: async () => {
        const counts = await runs.getJobCounts("waiting", "active", "delayed", "prioritized");
        return (
          Object.values(counts).every((n) => n === 0) && nodes.every(({ runner }) => runner.active() === 0 && runner.queued().length === 0)
        );
      },
      records: (name) => nodes[0]!.history.runs(name),
    };
  }

  it.each(QUEUED_BY_THE_CLUSTER.map((c) => [name(c), c] as const))("%s", async (_, c) => {
    expect(await play(await cluster(c), c)).toBe(c.expect);
  });
});
