import { Queue, UnrecoverableError, WaitingError, Worker, type Job as QueuedJob, type JobsOptions } from "bullmq";
import type { Redis } from "ioredis";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import { decideOverlap, REPLACED, type FireDecision } from "../runner/overlap.js";
import type { AttemptWatch, RunOptions } from "../runner/requests.js";
import type { Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import type { RunRecord, RunStatus } from "../store/run-record.js";
import type { RunHistoryStore } from "../store/run-history.js";
import type { SharedStateStore } from "../store/state.js";
import { errorText } from "../text.js";
import { heldRunShape, ownFire, type HeldRun, type QueuedFire } from "./fire-shapes.js";
import { lostConnection } from "./redis.js";
import { LET_GO_MS, settlesWithin } from "./settle.js";

/** BullMQ's key prefix for the cluster's queue: `countd:runs:…`. */
const PREFIX = "countd";
/**
 * Where a slot of an `overlap: skip` job is decided once, skipped or run, by whichever daemon claims
 * it first: one whose add found a run in the way records it skipped, one that took it (added late by
 * a daemon whose timer fired after the run ended) runs it. The value says which, and by what node.
 */
const SKIP_OR_RUN_PREFIX = "countd:fires:skip-or-run:";
/** Where the daemon that decides a deduplicated fire of an `overlap: replace` job claims it, and replaces the run. */
const REPLACED_PREFIX = "countd:fires:replaced:";
/** The skip's text for a fire of an `overlap: skip` job that found a run of it waiting or running on any daemon. */
const BUSY = "a run of this job was waiting or in progress in the cluster (overlap: skip)";

/**
 * Completed fires are kept at least this long, whatever the jobs' `catch_up`: past any timer's
 * lateness (a fire later than a minute counts as downtime) and any clock skew between nodes, so a
 * slow node's fire still finds its slot taken.
 */
const KEEP_AT_LEAST_MS = 10 * 60_000;

/**
 * Workers taking fires from `runs` on each daemon, at most (fewer when runner.concurrency is lower),
 * sharing its runner.concurrency between them. A BullMQ worker takes its jobs one round trip after
 * another and starts none before it took all it may hold or found `runs` empty, so the first of a
 * thousand fires due at once waits for the last: taken by BullMQ alone in one process, a thousand
 * jobs reached their workers 690 ms after the add with 1 worker, 400 ms with 8, 245 ms with 32 and
 * 221 ms with 64. Each worker holds one more connection to Redis (its blocking read).
 */
export const TAKERS = 32;

/**
 * How long a daemon's hold on a fire or delivery it took (BullMQ's job lock) lasts unless renewed,
 * unless countd.yaml sets cluster.hold. BullMQ renews it every half of this while the run goes on,
 * however long the run, so only a daemon that stopped (killed, its machine down, cut off from Redis)
 * or whose event loop stalled for half the hold loses it.
 */
export const HOLD_MS = 20_000;

/**
 * BullMQ's lock options for a hold of `holdMs`. The daemons (one at a time, cluster-wide) look for
 * expired holds four times per hold, so another daemon notices a dead one's run at most one and a
 * half holds after its last renewal.
 */
export function holdOptions(holdMs: number): { lockDuration: number; stalledInterval: number } {
  return { lockDuration: holdMs, stalledInterval: Math.round(holdMs / 4) };
}

/**
 * BullMQ fails a fire outright once its hold expired more often than this; countd's own rule (the
 * job's retry.attempts) stops reruns long before, so this only ends a fire that kills every daemon
 * that takes it before its run even starts.
 */
const MAX_STALLS = 20;
/** A note in the fire's queued job (which run, which attempt) waits at most this for Redis; the run goes on regardless. */
const NOTE_WAIT_MS = 5_000;

/** The statuses a run is retried after (the runner's rule): not cancelled, skipped or over budget. */
const RETRIED: readonly RunStatus[] = ["error", "timeout"];

/**
 * A slot's id in the queue: every daemon's timer adds the same slot under the same id, and BullMQ
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
  runner: Pick<Runner, "request">;
  /** The job's definition on this daemon. */
  job: (name: string) => Job | undefined;
  /** Runs this daemon takes from the cluster at once: its runner.concurrency. */
  concurrency: number;
  /** This daemon's node name, noted with each run it makes of a fire. */
  node: string;
  /** The cluster's run history, where a run another daemon left is marked interrupted. */
  history: RunHistoryStore;
  /** The cluster's job state, read again before a fire is run: the runner's pause check must see a pause made on any node. */
  state: Pick<SharedStateStore, "refresh">;
  /**
   * A run another daemon left mid-run, now recorded interrupted, that no retry follows: reported as
   * a daemon alone reports a run its crash cut short (RunDispatcher.interrupted).
   */
  interrupted?: (job: Job, run: RunRecord) => Promise<void>;
  /** Cancels a run in progress on whichever node holds it (view.ts), for a newer fire of an `overlap: replace` job. */
  replace?: (run: { id: string; job: string; node: string }, why: string) => unknown;
  /**
   * The status a run's deliveries in the cluster's outbox carry, if it queued any: a daemon that went
   * between queueing them and noting the run's end had ended the run (ClusterOutbox.queuedStatus).
   */
  queued?: (job: Job, runId: string) => Promise<RunStatus | undefined>;
  /**
   * Asked on the daemon that took a new fire, on the state just read again: the fire to run, or
   * undefined when its job's rules (the heartbeat's) say there is nothing to run.
   */
  admit?: (request: FireRequest) => Promise<FireRequest | undefined>;
  /** How long a hold on a fire lasts unless renewed (cluster.hold); HOLD_MS if not given. */
  holdMs?: number;
  now?: () => Date;
  log?: Logger;
}

/**
 * Each slot fires once across the cluster, through one BullMQ queue, `runs`. Every daemon keeps its
 * own croner timers (triggers/cron.ts) and adds each due slot under its slot id, so the daemons'
 * duplicates collapse into one job (BullMQ returns the job already there), with BullMQ's
 * deduplication for the job's overlap policy: under `skip` a fire that finds a run of the job
 * waiting or running anywhere is not added, and one daemon (the first to claim the decision in
 * Redis) records it skipped; under `queue` and `replace` one more waits (the newest), so the job
 * never runs on two nodes at once, and under `replace` the run in progress is cancelled on its node,
 * so the waiting one starts when it stopped; under `allow` every fire is added. The fires of one
 * timer tick go to Redis in one round trip (`addBulk`). Whichever daemon takes a job (up to its
 * runner.concurrency at once) runs it through its own runner, and the job stays active, its lock
 * renewed, until the run ended.
 *
 * A daemon killed mid-run stops renewing its lock; once it expired (cluster.hold), BullMQ's stalled check
 * puts the fire back in `runs`, and the daemon that takes it finds the run noted in it: that run is
 * recorded `interrupted` (with its node), and it is run again, reason `retry`, attempt counted, only
 * when the job's retry.attempts allow (see resume()).
 */
export class ClusterFires {
  private readonly runs: Queue;
  private readonly workers: Worker[];
  /** This tick's fires, added together once the timer handed on every due job. */
  private due: QueuedFire[] = [];
  private readonly log: Logger;
  private readonly now: () => Date;
  private keepSeconds = KEEP_AT_LEAST_MS / 1000;
  private closing = false;

  constructor(private readonly opts: ClusterFiresOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "cluster" });
    const connection = opts.redis;
    this.now = opts.now ?? (() => new Date());
    this.runs = new Queue("runs", { connection, prefix: PREFIX });
    const takers = Math.min(TAKERS, opts.concurrency);
    this.workers = Array.from(
      { length: takers },
      (_, i) =>
        new Worker("runs", (queued, token) => this.run(queued, token), {
          connection,
          prefix: PREFIX,
          concurrency: Math.floor(opts.concurrency / takers) + (i < opts.concurrency % takers ? 1 : 0),
          ...holdOptions(opts.holdMs ?? HOLD_MS),
          maxStalledCount: MAX_STALLS,
        }),
    );
    // A lost connection is logged once per outage (connectRedis), not by the queue and worker at each reconnection attempt.
    this.runs.on("error", (err) => {
      if (!lostConnection(err)) this.log.error({ error: errorText(err) }, "cluster queue error");
    });
    for (const worker of this.workers) {
      worker.on("error", (err) => {
        if (!lostConnection(err)) this.log.error({ error: errorText(err) }, "cluster worker error");
      });
      worker.on("failed", (queued, err) => this.log.error({ slot: queued?.id, error: errorText(err) }, "a cluster fire failed"));
      // Alive but cut off from Redis (or stalled) past the lock: another daemon may take the fire over.
      worker.on("lockRenewalFailed", (ids) =>
        this.log.error({ slots: ids }, "could not renew the hold on a fire; another daemon may run it again"),
      );
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

  /**
   * A cron slot or catch-up fire, added for the cluster with the others of its timer tick; waits
   * while Redis is away (the slot fires late, not never).
   */
  fire(request: FireRequest): void {
    if (this.due.length === 0) setImmediate(() => void this.add());
    this.due.push({
      job: request.job,
      reason: request.reason === "catch-up" ? "catch-up" : "schedule",
      scheduledAt: request.scheduledAt.toISOString(),
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
    if (await settlesWithin(closed, LET_GO_MS)) {
      await this.runs.close();
      return;
    }
    // BullMQ's commands wait for Redis, so its workers never finish closing: they are left behind
    // (Cluster.close drops the connection, `countd start` exits once stopped).
    this.log.warn(
      { waitedMs: LET_GO_MS },
      "Redis did not answer: stopping without handing back the fires taken; another daemon takes them once their hold expires",
    );
  }

  private kept(): Pick<JobsOptions, "removeOnComplete" | "removeOnFail"> {
    return { removeOnComplete: { age: this.keepSeconds }, removeOnFail: { age: this.keepSeconds } };
  }

  private async add(): Promise<void> {
    const fires = this.due;
    this.due = [];
    const ids = fires.map(slotIdOf);
    const decisions = fires.map((fire) => this.whenBusy(fire));
    let added: QueuedJob[];
    try {
      added = await this.runs.addBulk(
        fires.map((fire, i) => ({
          name: fire.job,
          data: fire,
          opts: { jobId: ids[i], ...this.kept(), ...deduplication(fire.job, decisions[i]!) },
        })),
      );
    } catch (err) {
      this.log.error({ jobs: fires.map((fire) => fire.job), error: errorText(err) }, "could not add the fires to the cluster's queue");
      return;
    }
    await Promise.all(
      fires.map(async (fire, i) => {
        // Another id: BullMQ deduplicated the fire into the job's run waiting or in progress.
        const into = added[i]!.id!;
        const decision = decisions[i]!;
        if (into === ids[i] || (decision.does !== "skip" && decision.does !== "replace")) return;
        try {
          await this.deduplicated(fire, decision, into);
        } catch (err) {
          this.log.error(
            { job: fire.job, slot: ids[i], error: errorText(err) },
            "could not decide on a fire the cluster's queue deduplicated",
          );
        }
      }),
    );
  }

  /**
   * What the overlap decision says of the fire should the job be busy anywhere in the cluster,
   * which the queue tells only once the fire is added: it chooses BullMQ's deduplication, and what
   * is done with a fire deduplicated. Pauses are not asked here: the daemon that takes the fire
   * asks them (its runner), on the shared state read again (run()).
   */
  private whenBusy(fire: QueuedFire): FireDecision {
    const job = this.opts.job(fire.job);
    if (!job) return { does: "beside" };
    return decideOverlap({ job, fire: { reason: fire.reason, manual: false }, paused: false, busy: "running", busyElsewhere: BUSY });
  }

  /**
   * A fire BullMQ deduplicated into the fire `into`, which every daemon that added it was told:
   * the first to claim the decision records the skip or replaces the run.
   */
  private async deduplicated(fire: QueuedFire, decision: Extract<FireDecision, { does: "skip" | "replace" }>, into: string): Promise<void> {
    if (decision.does === "replace") {
      const claimed = await this.opts.redis.set(`${REPLACED_PREFIX}${slotIdOf(fire)}`, this.opts.node, "EX", this.keepSeconds, "NX");
      if (claimed !== null) await this.replaceHeld(fire.job, into);
      return;
    }
    // Recorded by the daemon whose claim decided it: the others were told of the same fire.
    if ((await this.claimSkipOrRun(fire, "skipped")) === "claimed")
      await this.opts.runner.request(requestOf(fire), { skipped: decision }).ended;
  }

  /**
   * Claims the decision on a slot of an `overlap: skip` job for `wanted`: "claimed" when this claim
   * decided it, else what an earlier one decided.
   */
  private async claimSkipOrRun(fire: QueuedFire, wanted: "skipped" | "run"): Promise<"claimed" | "skipped" | "run"> {
    const key = `${SKIP_OR_RUN_PREFIX}${slotIdOf(fire)}`;
    if ((await this.opts.redis.set(key, `${wanted} ${this.opts.node}`, "EX", this.keepSeconds, "NX")) !== null) return "claimed";
    // Never changed once claimed: a GET apart from the SET reads what the first claim wrote.
    return (await this.opts.redis.get(key))?.startsWith("skipped ") ? "skipped" : "run";
  }

  /**
   * A newer fire of an `overlap: replace` job found the fire `id` in the way: if that one is being
   * run (its run noted in it), the run is cancelled on its node, as a daemon alone replaces its own
   * run, and the newer fire, kept by BullMQ, starts once it stopped. Into a fire still waiting the
   * newer one is merged, as a daemon alone merges the fires waiting behind a run it replaces.
   */
  private async replaceHeld(job: string, id: string): Promise<void> {
    const held = await this.runs.getJob(id);
    const run = heldRunShape.safeParse((held?.data as { run?: unknown } | undefined)?.run);
    if (!held || !run.success || !(await held.isActive())) return;
    this.log.info({ job, runId: run.data.id, node: run.data.node }, "a newer fire replaces the run in progress (overlap: replace)");
    this.opts.replace?.({ id: run.data.id, job, node: run.data.node }, REPLACED);
  }

  private async run(queued: QueuedJob, token: string | undefined): Promise<void> {
    if (this.closing) {
      await queued.moveToWait(token);
      throw new WaitingError();
    }
    const fire = this.ownFire(queued);
    const start = fire.run ? await this.resume(fire, fire.run) : { request: requestOf(fire) };
    if (!start) return;
    const { request, ...opts } = start;
    const [skipped] = await Promise.all([
      fire.run ? false : this.skippedElsewhere(fire),
      this.opts.state.refresh().catch((err: unknown) => {
        this.log.warn(
          { job: fire.job, error: errorText(err) },
          "could not read the cluster's job state; the fire is run on this daemon's copy",
        );
      }),
    ]);
    if (skipped) {
      this.log.info(
        { job: fire.job, slot: queued.id },
        "not run: another daemon recorded this slot skipped (overlap: skip) before this one added it",
      );
      return;
    }
    const admitted = fire.run || !this.opts.admit ? request : await this.opts.admit(request);
    if (!admitted) return;
    await this.opts.runner.request(admitted, { ...opts, watch: this.watch(queued) }).ended;
  }

  /** The fire as this node runs it (fire-shapes.ts); one it refuses is logged and failed for good. */
  private ownFire(queued: QueuedJob): QueuedFire {
    const fire = ownFire(queued.data, this.opts.job);
    if (!("refused" in fire)) return fire;
    this.log.warn({ slot: queued.id, error: fire.refused }, "fire in Redis refused; not run");
    throw new UnrecoverableError(`refused: ${fire.refused}`);
  }

  /**
   * Whether a fire of an `overlap: skip` job was recorded skipped by another daemon, whose add of
   * the slot found a run in the way, when a later add (a daemon whose timer fired late, the run
   * having ended meanwhile) made a fire of it. Both claim the slot's one decision, so it is either
   * skipped or run, never both; a fire taken again after its taker stopped finds its own claim.
   */
  private async skippedElsewhere(fire: QueuedFire): Promise<boolean> {
    if (this.whenBusy(fire).does !== "skip") return false;
    try {
      return (await this.claimSkipOrRun(fire, "run")) === "skipped";
    } catch (err) {
      this.log.warn(
        { job: fire.job, error: errorText(err) },
        "could not claim the slot's decision against another daemon's skip; it is run",
      );
      return false;
    }
  }

  /**
   * A fire whose run a daemon left (its hold expired): records that run `interrupted`, with its
   * node, and says how to run the fire again, or undefined when it is not run again:
   * - left mid-run: again when its attempt < the job's retry.attempts; if not, the run is reported
   *   as a daemon alone reports a run its crash cut short;
   * - left once the run had ended and queued its deliveries (on its node, which sends them when it
   *   runs again): again only when it failed and would have been retried there (the daemon went
   *   during the backoff); never reported, as its node queued what it had to say.
   */
  private async resume(
    fire: QueuedFire,
    noted: HeldRun,
  ): Promise<(Pick<RunOptions, "attempt" | "retry"> & { request: FireRequest }) | undefined> {
    const job = this.opts.job(fire.job);
    const left = await this.endedUnnoted(job, noted);
    const attempts = job?.retry.attempts ?? 1;
    const found = await this.markInterrupted(fire.job, left);
    const ended = found.ended ?? left.ended;
    const log = { job: fire.job, runId: left.id, node: left.node, attempt: left.attempt, attempts, ...(ended ? { ended } : {}) };
    if ((ended === undefined || RETRIED.includes(ended)) && left.attempt < attempts) {
      const backoffMs = job?.retry.backoffMs ?? 0;
      this.log.warn({ ...log, backoffMs }, "a run left by a daemon that stopped holding it is run again");
      const request: FireRequest = { job: fire.job, reason: "retry", scheduledAt: new Date(this.now().getTime() + backoffMs) };
      return { request, attempt: left.attempt + 1, retry: { of: left.id, backoffMs } };
    }
    this.log.warn(log, "a run left by a daemon that stopped holding it is not run again");
    if (ended === undefined && job && found.marked) {
      await this.opts
        .interrupted?.(job, found.marked)
        .catch((err: unknown) => this.log.error({ ...log, error: errorText(err) }, "could not report the interrupted run"));
    }
    return undefined;
  }

  /**
   * The left run as noted, or, when the note says it had not ended but its deliveries are queued,
   * as ended with the status they carry: run again, its answer would go out twice (a rerun is a
   * new run, and its deliveries new ids).
   */
  private async endedUnnoted(job: Job | undefined, left: HeldRun): Promise<HeldRun> {
    if (left.ended !== undefined || !job || !this.opts.queued) return left;
    const ended = await this.opts.queued(job, left.id).catch((err: unknown) => {
      this.log.error({ job: job.name, runId: left.id, error: errorText(err) }, "could not look for the deliveries of a run a daemon left");
      return undefined;
    });
    return ended === undefined ? left : { ...left, ended };
  }

  /**
   * Looks up the left run's record: `marked`, the record now `interrupted`, when it was still
   * `running`; `ended`, the status of a final record saved before the daemon went. Neither when the
   * record is missing (trimmed, never saved, Redis failed the read) or was marked interrupted by its
   * own daemon, started again (which reported it).
   */
  private async markInterrupted(job: string, left: HeldRun): Promise<{ marked?: RunRecord; ended?: RunStatus }> {
    try {
      const run = (await this.opts.history.runs(job)).find((record) => record.id === left.id);
      if (!run) {
        this.log.warn({ job, runId: left.id, node: left.node }, "the record of a run a daemon left is not in the history");
        return {};
      }
      if (run.status === "interrupted") return {};
      if (run.status !== "running") return { ended: run.status };
      const error =
        left.ended === undefined
          ? `node ${left.node} stopped while this run was in progress`
          : `node ${left.node} stopped after this run ended (${left.ended}) and queued its deliveries, before its record was saved`;
      const marked: RunRecord = { ...run, status: "interrupted", finishedAt: this.now().toISOString(), error };
      await this.opts.history.save(job, [marked]);
      this.log.warn({ job, runId: run.id, node: left.node }, "run marked interrupted: its daemon stopped holding it");
      return { marked };
    } catch (err) {
      this.log.error({ job, runId: left.id, node: left.node, error: errorText(err) }, "could not mark a run a daemon left as interrupted");
      return {};
    }
  }

  /** Notes each attempt of the fire's run in its queued job, for a daemon that takes the fire over. */
  private watch(queued: QueuedJob): AttemptWatch {
    const note = (run: HeldRun) => this.note(queued, run);
    return {
      started: (record, attempt) => note({ id: record.id, node: this.opts.node, attempt }),
      queued: (record, attempt) => note({ id: record.id, node: this.opts.node, attempt, ended: record.status }),
    };
  }

  /**
   * Replaces the queued job's data with the fire and its run. Waits for Redis at most NOTE_WAIT_MS:
   * a run is not held up by an outage; a note sent meanwhile is written in order once Redis is back.
   */
  private async note(queued: QueuedJob, run: HeldRun): Promise<void> {
    const data = { ...(queued.data as QueuedFire), run };
    const written = queued.updateData(data).catch((err: unknown) => {
      this.log.error({ slot: queued.id, runId: run.id, error: errorText(err) }, "could not note the run in the cluster's queue");
    });
    if (!(await settlesWithin(written, NOTE_WAIT_MS)))
      this.log.warn({ slot: queued.id, runId: run.id }, "noting the run in the cluster's queue is taking long; the run goes on");
  }
}

const slotIdOf = (fire: QueuedFire): string => slotId(fire.job, new Date(fire.scheduledAt));

function requestOf(fire: QueuedFire): FireRequest {
  return { job: fire.job, reason: fire.reason, scheduledAt: new Date(fire.scheduledAt) };
}

/**
 * BullMQ's deduplication for what a fire meeting a busy job does; the deduplication id is the
 * job's name. Under `queue` and `replace` one fire waits, the newest.
 */
function deduplication(job: string, decision: FireDecision): Pick<JobsOptions, "deduplication"> {
  switch (decision.does) {
    case "skip":
      return { deduplication: { id: job } };
    case "queue":
    case "replace":
      return { deduplication: { id: job, keepLastIfActive: true } };
    case "start":
    case "beside":
      return {};
  }
}
