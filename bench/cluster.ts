/**
 * Fire lateness in a cluster: 1,000 jobs due in the same second on three daemons (`countd start`
 * processes, as bench/daemon.ts starts them) sharing one real redis-server, beside one daemon alone
 * with the same jobs, measured one after the other in the same run. Lateness is each run's start
 * (its record's startedAt) minus its slot: in a cluster a slot passes through Redis (the `runs`
 * queue) between the timer and the run, so the timer alone (bench/scheduler.ts) would leave out
 * what the cluster adds. The LLM is an aimock server on loopback answering at once;
 * runner.concurrency is the job count on every daemon, so no run waits for a free slot and the
 * figures are the fire path's, not a queue's. Beside them, BullMQ alone (engineFloor) gives the
 * floor the engine itself sets on this machine.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { LLMock } from "@copilotkit/aimock";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { slotId, TAKERS } from "../src/cluster/fires.js";
import { RedisRunHistory } from "../src/cluster/run-history.js";
import { StateStore } from "../src/store/state.js";
import type { RunRecord } from "../src/store/run-record.js";
import { startRedis } from "../test/support/redis-server.js";
import { startCountd, stopCountd, type Started } from "./daemon.js";
import { percentile } from "./stats.js";

const JOBS = 1_000;
const NODES = ["bench-1", "bench-2", "bench-3"];
/** How far ahead of the job files' writing their slot is: the daemons start (1,000 jobs each) before it. */
const LEAD_MS = 40_000;
/** How long after the slot every run must have started. */
const RUNS_WITHIN_MS = 60_000;

export interface Lateness {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Where a cluster's fire spends its time, each step's p50 and p99 after the slot (BullMQ's own job timestamps). */
export interface FireSteps {
  /** Added to `runs` (the first of the daemons' adds). */
  added: Lateness;
  /** Taken from `runs` by the daemon that runs it. */
  taken: Lateness;
}

export interface ClusterLatenessResult {
  jobs: number;
  single: Lateness;
  /** BullMQ alone, no countd: JOBS jobs added at once, each one's lateness when its worker starts it, after the add began. */
  engine: Lateness & { takers: number };
  cluster: Lateness & { runsByNode: Record<string, number>; steps: FireSteps };
}

/** The i-th of the JOBS jobs, the same name in the daemons' job files and in BullMQ alone. */
const jobName = (i: number) => `job-${String(i).padStart(4, "0")}`;

/** countd.yaml (with `extra` lines) and JOBS job files all due at `slot`, in a new folder. */
async function home(slot: Date, extra: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "countd-bench-cluster-"));
  const config = ["timezone: UTC", "runner:", `  concurrency: ${JOBS}`, "tools:", "  exec:", "    sandbox: none", ...extra, ""];
  await writeFile(join(dir, "countd.yaml"), config.join("\n"));
  await mkdir(join(dir, "jobs"));
  const schedule = `${slot.getUTCSeconds()} ${slot.getUTCMinutes()} ${slot.getUTCHours()} * * *`;
  const job = [`schedule: "${schedule}"`, "prompt: Bench.", "tools: []", ""].join("\n");
  await Promise.all(Array.from({ length: JOBS }, (_, i) => writeFile(join(dir, "jobs", `${jobName(i)}.yaml`), job)));
  return dir;
}

/** A whole second LEAD_MS ahead. */
const nextSlot = () => new Date(Math.ceil((Date.now() + LEAD_MS) / 1_000) * 1_000);

function spread(times: number[], slot: Date): Lateness {
  const sorted = times.map((time) => time - slot.getTime()).sort((a, b) => a - b);
  return { p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), maxMs: sorted.at(-1)! };
}

function lateness(runs: readonly RunRecord[], slot: Date): Lateness {
  if (runs.length !== JOBS) throw new Error(`bench/cluster: ${runs.length} runs recorded, not ${JOBS}`);
  return spread(
    runs.map((run) => Date.parse(run.startedAt)),
    slot,
  );
}

/** The steps of each run's fire, from the jobs BullMQ keeps in `runs` (as long as catch_up, at least 10 minutes). */
async function fireSteps(connection: Redis, runs: readonly RunRecord[], slot: Date): Promise<FireSteps> {
  const queue = new Queue("runs", { connection, prefix: "countd" });
  const fires = await Promise.all(runs.map((run) => queue.getJob(slotId(run.job, slot))));
  const at = (pick: (fire: (typeof fires)[number]) => number | undefined) => fires.map((fire) => pick(fire) ?? Number.NaN);
  return {
    added: spread(
      at((fire) => fire?.timestamp),
      slot,
    ),
    taken: spread(
      at((fire) => fire?.processedOn),
      slot,
    ),
  };
}

/**
 * What BullMQ alone takes, in this process, for JOBS jobs added at once (one addBulk, the options a
 * fire carries) and taken by as many workers as a daemon with runner.concurrency JOBS has: each
 * job's lateness when its worker's processor starts, after the add began. A floor under the
 * cluster's figure, which adds the timers, three daemons sharing the cores, and the run's start.
 */
async function engineFloor(url: string): Promise<Lateness & { takers: number }> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const prefix = "countd-bench-engine";
  const queue = new Queue("runs", { connection, prefix });
  const started: number[] = [];
  let allStarted!: () => void;
  const all = new Promise<void>((resolve) => (allStarted = resolve));
  const workers = Array.from(
    { length: TAKERS },
    () =>
      new Worker(
        "runs",
        async () => {
          if (started.push(Date.now()) === JOBS) allStarted();
          await sleep(5_000);
        },
        { connection, prefix, concurrency: Math.ceil(JOBS / TAKERS) },
      ),
  );
  try {
    await Promise.all(workers.map((worker) => worker.waitUntilReady()));
    // The workers' first blocking reads.
    await sleep(1_000);
    const at = new Date();
    await queue.addBulk(
      Array.from({ length: JOBS }, (_, i) => {
        const job = jobName(i);
        return {
          name: job,
          data: { job, reason: "schedule", scheduledAt: at.toISOString() },
          opts: { jobId: slotId(job, at), removeOnComplete: { age: 600 }, deduplication: { id: job } },
        };
      }),
    );
    if (!(await Promise.race([all.then(() => true), sleep(RUNS_WITHIN_MS).then(() => false)])))
      throw new Error(`bench/cluster: BullMQ alone started ${started.length} of ${JOBS} jobs`);
    return { ...spread(started, at), takers: TAKERS };
  } finally {
    await Promise.all(workers.map((worker) => worker.close(true)));
    await queue.close();
    connection.disconnect();
  }
}

/** Starts the daemons in `homes`, waits for the slot and every run's LLM call, stops them; throws if one started after the slot. */
async function fire(homes: string[], slot: Date, mock: LLMock): Promise<void> {
  const daemons: Started[] = [];
  try {
    daemons.push(...(await Promise.all(homes.map((dir) => startCountd(dir, JOBS, `${mock.url}/v1`)))));
    if (Date.now() >= slot.getTime())
      throw new Error(`bench/cluster: the daemons started after the slot; LEAD_MS (${LEAD_MS} ms) is too short on this machine`);
    const deadline = slot.getTime() + RUNS_WITHIN_MS;
    while (mock.getRequests().length < JOBS && Date.now() < deadline) await sleep(250);
    // The last runs' final records.
    await sleep(2_000);
  } finally {
    await Promise.all(daemons.map((daemon) => stopCountd(daemon)));
  }
}

export async function benchClusterLateness(): Promise<ClusterLatenessResult> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  mock.onMessage("Bench.", { content: "Done." });
  await mock.start();
  const redis = await startRedis();
  const dirs: string[] = [];
  try {
    const singleSlot = nextSlot();
    const single = await home(singleSlot, []);
    dirs.push(single);
    await fire([single], singleSlot, mock);
    const singleRuns = await (await StateStore.open(join(single, "state"))).allRuns();
    mock.clearRequests();

    const clusterSlot = nextSlot();
    const nodes = await Promise.all(NODES.map((node) => home(clusterSlot, ["cluster:", `  redis: ${redis.url}`, `  node: ${node}`])));
    dirs.push(...nodes);
    await fire(nodes, clusterSlot, mock);
    const client = new Redis(redis.url);
    const history = new RedisRunHistory(client);
    const clusterRuns = (await Promise.all((await history.jobs()).map((job) => history.runs(job)))).flat();
    const steps = await fireSteps(client, clusterRuns, clusterSlot);
    client.disconnect();
    const runsByNode = Object.fromEntries(NODES.map((node) => [node, clusterRuns.filter((run) => run.node === node).length]));

    const engine = await engineFloor(redis.url);

    return {
      jobs: JOBS,
      single: lateness(singleRuns, singleSlot),
      engine,
      cluster: { ...lateness(clusterRuns, clusterSlot), runsByNode, steps },
    };
  } finally {
    await redis.stop();
    await mock.stop();
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }
}
