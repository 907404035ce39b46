import type { Backend, DaemonBackend, OutboxListing } from "../backend/types.js";
import type { ClusterConfig, Config } from "../config/schema.js";
import { silentLogger, type Logger } from "../log.js";
import { checkInsToChange, StateStore, type SharedState } from "../store/state.js";
import { clusterApprovalKey, RedisApprovals } from "./approvals.js";
import { Cluster } from "./cluster.js";
import { closeCommandRedis, commandRedis } from "./command-redis.js";
import { NO_DELIVERIES } from "../delivery/own-deliveries.js";
import { openClusterOutbox } from "./outbox.js";
import { RedisRunHistory } from "./run-history.js";
import { ClusterSessions } from "./sessions.js";
import { RedisSharedState } from "./shared-state.js";
import { ClusterSpend, readClusterSpend } from "./spend.js";
import { RedisTranscripts } from "./transcripts.js";

const KEPT_OFFLINE = "countd is not running here: kept in the cluster's Redis, which every node follows";

/**
 * A daemon of a cluster: Redis checked and joined at once (RedisUnusable stops the start), its
 * schedule's fires run by whichever daemon takes each slot.
 */
export async function clusterDaemonBackend(config: Config, settings: ClusterConfig, log: Logger = silentLogger): Promise<DaemonBackend> {
  const cluster = await Cluster.join(settings, log);
  return {
    node: settings.node,
    sharedOutbox: true,
    keptOffline: KEPT_OFFLINE,
    openState: () => StateStore.open(config.paths.state, { log, history: cluster.history, shared: cluster.state }),
    sessions: (local) => cluster.sessions(local),
    spend: (local, counting) => cluster.spend(local, counting),
    spendSince: (since) => cluster.spendSince(since),
    outbox: async (send, own, events) => cluster.outbox(send, own, events),
    readOutbox: () => readSharedOutbox(settings, log),
    transcripts: () => cluster.transcripts(() => config.paths.state, false),
    continueJournal: (job, runId) => cluster.transcripts(() => config.paths.state, false).continueHere(job, runId),
    recordExchange: (at) => cluster.state.update(lastContact(at)),
    approvals: () => cluster.approvals(),
    scheduled: () => (request) => cluster.fire(request),
    view: (opts) => cluster.openView(opts),
    serve: (opts) => cluster.serve(opts),
    retain: (jobs) => cluster.retain(jobs),
    stop: (shutdown) => cluster.stop(shutdown),
    close: () => cluster.close(),
  };
}

/**
 * A command on a node of a cluster: one connection to Redis, which fails at once while Redis is
 * away (RedisUnusable, exit 78), so `countd history` on any node lists every node's runs and
 * `countd pause` without a daemon pauses the job on every node.
 */
export async function clusterCommandBackend(config: Config, settings: ClusterConfig, log: Logger = silentLogger): Promise<Backend> {
  const redis = await commandRedis(settings, { log });
  const shared = () => RedisSharedState.open(redis, { log });
  return {
    node: settings.node,
    sharedOutbox: true,
    keptOffline: KEPT_OFFLINE,
    openState: async () =>
      StateStore.open(config.paths.state, { log, history: new RedisRunHistory(redis, { log }), shared: await shared() }),
    sessions: (local) => new ClusterSessions(redis, local, { log }),
    spend: (local, counting) => new ClusterSpend(redis, local, { ...counting, log }),
    spendSince: (since) => readClusterSpend(redis, since),
    outbox: (send, own) => openClusterOutbox(settings, send, own, log),
    readOutbox: () => readSharedOutbox(settings, log),
    transcripts: () => new RedisTranscripts(redis, { node: settings.node, state: () => config.paths.state, log }),
    continueJournal: (job, runId) =>
      new RedisTranscripts(redis, { node: settings.node, state: () => config.paths.state, log }).continueHere(job, runId),
    recordExchange: async (at) => (await shared()).update(lastContact(at)),
    approvals: async () => ({ store: new RedisApprovals(redis, { log }), key: await clusterApprovalKey(redis) }),
    close: () => closeCommandRedis(redis),
  };
}

/** Every node's deliveries, on a connection of the listing's own. */
async function readSharedOutbox(settings: ClusterConfig, log: Logger): Promise<OutboxListing> {
  const outbox = await openClusterOutbox(settings, () => Promise.reject(new Error("a listing sends nothing")), NO_DELIVERIES, log);
  try {
    const { pending, dead } = await outbox.list();
    return { entries: [...pending, ...dead], disabledTargets: await outbox.disabledSince() };
  } finally {
    await outbox.close();
  }
}

/** `countd ask` was answered: the last contact in `@heartbeat`'s job state, which every node's heartbeat reads. */
function lastContact(at: Date) {
  return (data: SharedState) => {
    const checkIns = checkInsToChange(data);
    if (checkIns.lastContactAt === undefined || Date.parse(checkIns.lastContactAt) < at.getTime())
      checkIns.lastContactAt = at.toISOString();
  };
}
