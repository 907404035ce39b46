import type { Redis } from "ioredis";
import type { ClusterConfig } from "../config/schema.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import type { RunRecord } from "../store/run-record.js";
import { checkRedis } from "./checks.js";
import { ClusterFires } from "./fires.js";
import { connectRedis } from "./redis.js";
import { RedisRunHistory } from "./run-history.js";
import type { TranscriptStore } from "../store/transcripts.js";
import { RedisTranscripts } from "./transcripts.js";
import { ClusterView, type ClusterViewOptions, type LiveLike } from "./view.js";

/**
 * This daemon's membership of a cluster: the checked Redis, the shared run history, and (once
 * serving) the shared fire queues. Shared so far: the schedule's fires, the run records and their
 * transcripts, and the view of runs in progress (view.ts: live stream, status, cancel). Still
 * this daemon's own: watch, webhook and manual fires, the heartbeat, job state and pauses
 * (state.json), sessions and the outbox.
 */
export class Cluster {
  private fires: ClusterFires | undefined;
  private view: Pick<ClusterView<LiveLike>, "cancel" | "close"> | undefined;

  private constructor(
    private readonly url: string,
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
    return new Cluster(settings.redis, settings.node, new RedisRunHistory(records, { log }), queues, records, log);
  }

  /**
   * Joins the cluster's view of runs (view.ts) on a connection of its own, its transcripts this
   * node's from `local` (its files) and other nodes' from Redis; before serve(), so a run taken at once is seen.
   */
  async openView<M extends LiveLike>(
    opts: Omit<ClusterViewOptions<M>, "node" | "publisher" | "subscriber" | "transcripts" | "log"> & { local: TranscriptStore },
  ): Promise<ClusterView<M>> {
    const { local, ...rest } = opts;
    const transcripts = new RedisTranscripts(this.records, { node: this.node, local, log: this.log });
    const subscriber = await connectRedis(this.url, "records", { name: `countd:${this.node}:view`, log: this.log });
    try {
      const view = await ClusterView.open({ ...rest, transcripts, node: this.node, publisher: this.records, subscriber, log: this.log });
      this.view = view;
      return view;
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
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
    this.fires = new ClusterFires({
      redis: this.queues,
      ...opts,
      node: this.node,
      history: this.history,
      replace: (run, why) => this.view?.cancel(run, why),
      log: this.log,
    });
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

  /** Closes the connections, after the last record was saved and transcript stored; one that is down is dropped, not waited for. */
  async close(): Promise<void> {
    await this.view?.close();
    for (const client of [this.queues, this.records]) {
      if (client.status === "ready") await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }
  }
}
