import { Queue, WaitingError, Worker, type Job as QueuedJob, type JobsOptions } from "bullmq";
import type { Redis } from "ioredis";
import { z } from "zod";
import type { Job, OverlapPolicy } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import { overlapOf, type Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import { isoTime } from "../store/quarantine.js";
import { errorText } from "../text.js";

/** BullMQ's key prefix for the cluster's queues: `countd:slots:…`, `countd:runs:…`. */
const PREFIX = "countd";

/**
 * Completed fires are kept at least this long, whatever the jobs' `catch_up`: past any timer's
 * lateness (a fire later than a minute counts as downtime) and any clock skew between nodes, so a
 * slow node's fire still finds its slot taken.
 */
const KEEP_AT_LEAST_MS = 10 * 60_000;

/**
 * Hand-offs from the slot queue to the run queue at once: each is one round trip to Redis, so
 * this only matters when many jobs are due in the same second.
 */
const HANDOFFS_AT_ONCE = 16;

/** What a queued fire carries; checked when taken, as it may come from another countd version. */
const fireShape = z.object({
  job: z.string().min(1),
  reason: z.enum(["schedule", "catch-up"]),
  scheduledAt: isoTime,
});
type QueuedFire = z.infer<typeof fireShape>;

/**
 * A slot's id in both queues: every daemon's timer adds the same slot under the same id, and BullMQ
 * keeps one job per id. BullMQ refuses ":" in a custom id (it marks its own repeat keys), so the
 * slot's time is written in ISO 8601's basic format, which has none, after "@", which no job name has:
 * `daily-report@20261130T090000.000Z`.
 */
export function slotId(job: string, scheduledAt: Date): string {
  return `${job}@${scheduledAt.toISOString().replace(/[-:]/g, "")}`;
}

export interface ClusterFiresOptions {
  /** A `queues` connection (redis.ts): BullMQ's workers duplicate it for their blocking reads. */
  redis: Redis;
  runner: Pick<Runner, "runToEnd" | "skip">;
  /** The job's definition on this daemon. */
  job: (name: string) => Job | undefined;
  /** Runs this daemon takes from the cluster at once: its runner.concurrency. */
  concurrency: number;
  log?: Logger;
}

/**
 * Each slot fires once across the cluster, through two BullMQ queues. Every daemon keeps its own
 * croner timers (triggers/cron.ts) and adds each due slot to `slots` under its slot id, so the
 * daemons' duplicates collapse into one job. Whichever daemon takes that job hands it on to `runs`,
 * once, with BullMQ's deduplication for the job's overlap policy: under `skip` a fire that finds a
 * run of the job waiting or running anywhere is not added, and that one daemon records it skipped;
 * under `queue` and `replace` one more waits (the newest), so the job never runs on two nodes at once;
 * under `allow` every fire is added. Whichever daemon takes a job from `runs` (up to its
 * runner.concurrency at once) runs it through its own runner, and the job stays active, its lock
 * renewed, until the run ended.
 */
export class ClusterFires {
  private readonly slots: Queue;
  private readonly runs: Queue;
  private readonly workers: Worker[];
  private readonly log: Logger;
  private keepSeconds = KEEP_AT_LEAST_MS / 1000;
  private closing = false;

  constructor(private readonly opts: ClusterFiresOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "cluster" });
    const connection = opts.redis;
    this.slots = new Queue("slots", { connection, prefix: PREFIX });
    this.runs = new Queue("runs", { connection, prefix: PREFIX });
    this.workers = [
      new Worker("slots", (queued) => this.handOn(queued), { connection, prefix: PREFIX, concurrency: HANDOFFS_AT_ONCE }),
      new Worker("runs", (queued, token) => this.run(queued, token), { connection, prefix: PREFIX, concurrency: opts.concurrency }),
    ];
    for (const queue of [this.slots, this.runs]) queue.on("error", (err) => this.log.error({ queue: queue.name, error: errorText(err) }, "cluster queue error"));
    for (const worker of this.workers) {
      worker.on("error", (err) => this.log.error({ queue: worker.name, error: errorText(err) }, "cluster worker error"));
      worker.on("failed", (queued, err) => this.log.error({ queue: worker.name, slot: queued?.id, error: errorText(err) }, "a cluster fire failed"));
    }
  }

  /**
   * The jobs armed on this daemon: completed fires are kept as long as the longest `catch_up`
   * among them, so a daemon that starts after every other was down finds a slot they already ran
   * (BullMQ trims a queue's completed jobs by the age the latest finished one carries).
   */
  retain(jobs: readonly Job[]): void {
    const longest = Math.max(KEEP_AT_LEAST_MS, ...jobs.map((job) => job.catchUpMs));
    this.keepSeconds = Math.ceil(longest / 1000);
  }

  /** A cron slot or catch-up fire, added for the cluster; waits while Redis is away (the slot fires late, not never). */
  fire(request: FireRequest): void {
    const fire: QueuedFire = { job: request.job, reason: request.reason === "catch-up" ? "catch-up" : "schedule", scheduledAt: request.scheduledAt.toISOString() };
    const id = slotId(fire.job, request.scheduledAt);
    this.slots.add(fire.job, fire, { jobId: id, ...this.kept() }).catch((err: unknown) => {
      this.log.error({ job: fire.job, slot: id, error: errorText(err) }, "could not add the fire to the cluster's queue");
    });
  }

  /**
   * Stops taking fires, then `shutdown` (the runner's) ends the runs in progress; resolves once the
   * workers let go of their jobs. A fire taken meanwhile goes back to the queue for another daemon.
   */
  async stop(shutdown: () => Promise<void>): Promise<void> {
    this.closing = true;
    const closed = Promise.all(this.workers.map((worker) => worker.close()));
    await shutdown();
    await closed;
    await Promise.all([this.slots.close(), this.runs.close()]);
  }

  private kept(): Pick<JobsOptions, "removeOnComplete" | "removeOnFail"> {
    return { removeOnComplete: { age: this.keepSeconds }, removeOnFail: { age: this.keepSeconds } };
  }

  private async handOn(queued: QueuedJob): Promise<void> {
    const fire = fireShape.parse(queued.data);
    const request = requestOf(fire);
    const job = this.opts.job(fire.job);
    const policy = job ? overlapOf(job, request) : "allow";
    const added = await this.runs.add(fire.job, fire, { jobId: queued.id!, ...this.kept(), ...deduplication(fire.job, policy) });
    // Another id: BullMQ deduplicated the fire into the job's run waiting or in progress.
    if (added.id === queued.id || policy !== "skip") return;
    this.opts.runner.skip(request, "a run of this job was waiting or in progress in the cluster (overlap: skip)");
  }

  private async run(queued: QueuedJob, token: string | undefined): Promise<void> {
    if (this.closing) {
      await queued.moveToWait(token);
      throw new WaitingError();
    }
    await this.opts.runner.runToEnd(requestOf(fireShape.parse(queued.data)));
  }
}

function requestOf(fire: QueuedFire): FireRequest {
  return { job: fire.job, reason: fire.reason, scheduledAt: new Date(fire.scheduledAt) };
}

/** BullMQ's deduplication for a job's overlap policy; the deduplication id is the job's name. */
function deduplication(job: string, policy: OverlapPolicy): Pick<JobsOptions, "deduplication"> {
  switch (policy) {
    case "skip":
      return { deduplication: { id: job } };
    case "queue":
    case "replace":
      return { deduplication: { id: job, keepLastIfActive: true } };
    case "allow":
      return {};
  }
}
