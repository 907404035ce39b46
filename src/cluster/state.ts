import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import { recordExchange as recordExchangeHere } from "../store/last-exchange.js";
import { StateStore } from "../store/state.js";
import { closeCommandRedis, commandRedis } from "./command-redis.js";
import { RedisRunHistory } from "./run-history.js";
import { RedisSharedState } from "./shared-state.js";

/**
 * The state store a command opens beside (or instead of) the daemon: its state directory, and in a
 * cluster the cluster's run history and shared state in Redis, so `countd history` on any node
 * lists every node's runs and `countd pause` without a daemon pauses the job on every node.
 * `close` waits for the saves and lets go of Redis.
 */
export async function openState(config: Config, opts: { log?: Logger } = {}): Promise<{ state: StateStore; close(): Promise<void> }> {
  if (!config.cluster) {
    const state = await StateStore.open(config.paths.state, opts);
    return { state, close: () => state.close() };
  }
  const redis = await commandRedis(config.cluster, opts);
  try {
    const shared = await RedisSharedState.open(redis, opts);
    const state = await StateStore.open(config.paths.state, { ...opts, history: new RedisRunHistory(redis, opts), shared });
    return {
      state,
      async close() {
        await state.close();
        await closeCommandRedis(redis);
      },
    };
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

/**
 * `countd ask` was answered: the heartbeat's idle threshold counts from `at`. Alone, in the state
 * directory's file; in a cluster, as the shared heartbeat state's last contact, which every node's
 * heartbeat reads.
 */
export async function recordExchange(config: Config, at = new Date()): Promise<void> {
  if (!config.cluster) return recordExchangeHere(config.paths.state, at);
  const { state, close } = await openState(config);
  try {
    await state.update(({ heartbeat }) => {
      if (heartbeat.lastContactAt === undefined || Date.parse(heartbeat.lastContactAt) < at.getTime())
        heartbeat.lastContactAt = at.toISOString();
    });
  } finally {
    await close();
  }
}
