import type { Redis } from "ioredis";
import type { ClusterConfig } from "../config/schema.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import type { RunRecord } from "../store/run-record.js";
import { checkRedis } from "./checks.js";
import type { SendFn } from "../delivery/delivery-outbox.js";
import type { EventBus } from "../events.js";
import { ClusterFires } from "./fires.js";
import { ClusterOutbox } from "./outbox.js";
import { connectRedis } from "./redis.js";
import { RedisRunHistory } from "./run-history.js";

/**
 * This daemon's membership of a cluster: the checked Redis, the shared run history, the shared
 * outbox, and (once serving) the shared fire queues. Shared so far: the schedule's fires, the run
 * records and the deliveries. Still this daemon's own: watch, webhook and manual fires, the
 * heartbeat, job state and pauses (state.json), sessions and transcripts.
 */
export class Cluster {
  private fires: ClusterFires | undefined;
  private deliveries: ClusterOutbox | undefined;

  private constructor(
    readonly node: string,
    readonly history: RedisRunHistory,
    private readonly queues: Redis,
    private readonly records: Redis,
    private readonly log: Logger,
  ) {}

  /**
   * Checks Redis (RedisUnusable when it cannot serve: the start stops with exit 78), logs what is
   * worth fixing, and connects. Nothing is taken from the queues until serve().
   */
  static async join(settings: ClusterConfig, log: Logger = silentLogger): Promise<Cluster> {
    const { warnings } = await checkRedis(settings.redis);
    warnings.forEach((warning) => log.warn(warning));
    const name = `countd:${settings.node}`;
    const records = await connectRedis(settings.redis, "records", { name, log });
    let queues: Redis;
    try {
      queues = await connectRedis(settings.redis, "queues", { name, log });
    } catch (err) {
      records.disconnect();
      throw err;
    }
    return new Cluster(settings.node, new RedisRunHistory(records, { log }), queues, records, log);
  }

  /**
   * Starts taking the cluster's fires, each run through `runner`; `interrupted` reports a run a
   * killed daemon left that is not run again (RunDispatcher.interrupted).
   */
  serve(opts: {
    runner: Runner;
    job: (name: string) => Job | undefined;
    concurrency: number;
    interrupted?: (job: Job, run: RunRecord) => Promise<void>;
  }): void {
    const queued = async (job: Job, runId: string) => this.deliveries?.queuedStatus(job, runId);
    this.fires = new ClusterFires({ redis: this.queues, ...opts, queued, node: this.node, history: this.history, log: this.log });
  }

  /** The cluster's outbox, which this daemon's runs queue to and whose deliveries it sends with `send` once started. */
  outbox(send: SendFn, events?: EventBus): ClusterOutbox {
    this.deliveries = new ClusterOutbox({ redis: this.queues, send, events, log: this.log });
    return this.deliveries;
  }

  /** The jobs armed on this daemon, whose catch_up windows decide how long fires are kept. */
  retain(jobs: readonly Job[]): void {
    this.fires?.retain(jobs);
  }

  /** A cron slot or catch-up fire: run once in the cluster, on whichever daemon takes it. */
  fire(request: FireRequest): void {
    if (!this.fires) throw new Error("the cluster's fires are not served yet");
    this.fires.fire(request);
  }

  /** Stops taking fires while `shutdown` (the runner's) ends the runs in progress. */
  async stop(shutdown: () => Promise<void>): Promise<void> {
    if (this.fires) await this.fires.stop(shutdown);
    else await shutdown();
  }

  /** Closes the connections, after the last record was saved; one that is down is dropped, not waited for. */
  async close(): Promise<void> {
    for (const client of [this.queues, this.records]) {
      if (client.status === "ready") await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }
  }
}
