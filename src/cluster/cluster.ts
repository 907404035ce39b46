import type { Redis } from "ioredis";
import type { ClusterConfig } from "../config/schema.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import { nodeTag } from "../runner/run-ids.js";
import type { Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import type { RunRecord } from "../store/run-record.js";
import type { ApprovalStore } from "../approvals/types.js";
import { clusterApprovalKey, RedisApprovals } from "./approvals.js";
import { checkRedis } from "./checks.js";
import type { SendFn } from "../delivery/delivery-outbox.js";
import type { EventBus } from "../events.js";
import { ClusterFires, type ClusterFiresOptions } from "./fires.js";
import { ClusterOutbox } from "./outbox.js";
import type { OwnDeliveries } from "../delivery/own-deliveries.js";
import { connectRedis } from "./redis.js";
import { RedisRunHistory } from "./run-history.js";
import { RedisSharedState } from "./shared-state.js";
import { RedisTranscripts } from "./transcripts.js";
import { ClusterView, type ClusterViewOptions, type LiveLike } from "./view.js";
import { ClusterSessions } from "./sessions.js";
import { ClusterSpend, readClusterSpend, type ClusterSpendOptions } from "./spend.js";
import type { SessionStore } from "../sessions/store.js";
import type { SpendLedger, SpendLine } from "../store/spend-ledger.js";

/** Every node name that joined the cluster. */
const NODES_KEY = "countd:nodes";

/**
 * Notes this node in the cluster's list of nodes; warns when another node's name gives its run ids
 * the same tag (1 in 65,536 pairs of names): their ids could then repeat each other's.
 */
async function warnOfTagClash(records: Redis, node: string, log: Logger): Promise<void> {
  const [[, others]] = (await records.multi().smembers(NODES_KEY).sadd(NODES_KEY, node).exec()) as [[Error | null, string[]]];
  const clash = others.find((other) => other !== node && nodeTag(other) === nodeTag(node));
  if (clash)
    log.warn(
      { node, other: clash, tag: nodeTag(node) },
      `run ids of node ${node} could repeat those of node ${clash}: their names give the same tag; rename one (cluster.node)`,
    );
}

/**
 * This daemon's membership of a cluster: the checked Redis, the shared run history, state and
 * outbox, and (once serving) the shared fire queues. Shared: the schedule's fires, the run records
 * and their transcripts, the deliveries, the view of runs in progress (view.ts: live stream,
 * status, cancel), job state and pauses, the heartbeat's ticks and state, the sessions of
 * `session: shared` jobs, the spend the daily budgets count and the approvals with the runs waiting on them. Still this daemon's own: watch,
 * webhook and manual fires, and the running index (state.json).
 */
export class Cluster {
  private fires: ClusterFires | undefined;
  private view: Pick<ClusterView<LiveLike>, "cancel" | "close"> | undefined;
  private deliveries: ClusterOutbox | undefined;

  private constructor(
    private readonly url: string,
    readonly node: string,
    /** How long a hold on a fire or delivery this daemon took lasts unless renewed (cluster.hold). */
    private readonly holdMs: number,
    readonly history: RedisRunHistory,
    readonly state: RedisSharedState,
    private readonly queues: Redis,
    private readonly records: Redis,
    private readonly subscriber: Redis,
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
    const connected: Redis[] = [];
    try {
      const records = await connectRedis(settings.redis, "records", { name, log });
      connected.push(records);
      await warnOfTagClash(records, settings.node, log);
      const queues = await connectRedis(settings.redis, "queues", { name, log });
      connected.push(queues);
      const subscriber = await connectRedis(settings.redis, "records", { name, log });
      connected.push(subscriber);
      const state = await RedisSharedState.open(records, { subscriber, log });
      return new Cluster(
        settings.redis,
        settings.node,
        settings.hold,
        new RedisRunHistory(records, { log }),
        state,
        queues,
        records,
        subscriber,
        log,
      );
    } catch (err) {
      connected.forEach((client) => client.disconnect());
      throw err;
    }
  }

  /**
   * Joins the cluster's view of runs (view.ts) on a connection of its own, its transcripts this
   * node's from the journals in `state` and other nodes' from Redis; before serve(), so a run taken at once is seen.
   */
  async openView<M extends LiveLike>(
    opts: Omit<ClusterViewOptions<M>, "node" | "publisher" | "subscriber" | "transcripts" | "log"> & { state: () => string },
  ): Promise<ClusterView<M>> {
    const { state, ...rest } = opts;
    const transcripts = this.transcripts(state, true);
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
    admit?: ClusterFiresOptions["admit"];
  }): void {
    const queued = async (job: Job, runId: string) => this.deliveries?.queuedStatus(job, runId);
    this.fires = new ClusterFires({
      redis: this.queues,
      ...opts,
      queued,
      node: this.node,
      holdMs: this.holdMs,
      history: this.history,
      state: this.state,
      replace: (run, why) => this.view?.cancel(run, why),
      log: this.log,
    });
  }

  /**
   * Where runs' transcripts are read: this node's from its journals in `state`, other nodes' from
   * Redis; `moveAside` for the daemon, which moves its journals' misfit lines to the quarantine file.
   */
  transcripts(state: () => string, moveAside: boolean): RedisTranscripts {
    return new RedisTranscripts(this.records, { node: this.node, state, log: this.log, moveAside });
  }

  /** Every node's LLM calls made since `since`. */
  spendSince(since: Date): Promise<SpendLine[]> {
    return readClusterSpend(this.records, since);
  }

  /** The sessions runs continue: `session: shared` jobs' in Redis, the others in `local`, this daemon's files. */
  sessions(local: SessionStore): ClusterSessions {
    return new ClusterSessions(this.records, local, { log: this.log });
  }

  /** What the budgets count: every node's calls, this daemon's also in `local`, its spend files. */
  spend(local: SpendLedger, opts: Omit<ClusterSpendOptions, "log">): ClusterSpend {
    return new ClusterSpend(this.records, local, { ...opts, log: this.log });
  }

  /** The approvals every node lists, answers and resumes, and the key their links are signed with on every node. */
  async approvals(): Promise<{ store: ApprovalStore; key: Buffer }> {
    return { store: new RedisApprovals(this.records, { log: this.log }), key: await clusterApprovalKey(this.records) };
  }

  /** The cluster's outbox, which this daemon's runs queue to and whose deliveries it sends with `send` once started. */
  outbox(send: SendFn, own: OwnDeliveries, events?: EventBus): ClusterOutbox {
    this.deliveries = new ClusterOutbox({ redis: this.queues, send, own, events, holdMs: this.holdMs, log: this.log });
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

  /** Closes the connections, after the last record was saved and transcript stored; one that is down is dropped, not waited for. */
  async close(): Promise<void> {
    await this.view?.close();
    for (const client of [this.queues, this.records, this.subscriber]) {
      if (client.status === "ready") await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }
  }
}
