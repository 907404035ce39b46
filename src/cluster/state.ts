import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import { StateStore } from "../store/state.js";
import { RedisUnusable } from "./checks.js";
import { connectRedis, shownUrl } from "./redis.js";
import { RedisRunHistory } from "./run-history.js";

/**
 * The state store a command opens beside (or instead of) the daemon: its state directory, and in a
 * cluster the cluster's run history in Redis, so `countd history` on any node lists every node's
 * runs. `close` waits for the saves and lets go of Redis.
 */
export async function openState(config: Config, opts: { log?: Logger } = {}): Promise<{ state: StateStore; close(): Promise<void> }> {
  if (!config.cluster) {
    const state = await StateStore.open(config.paths.state, opts);
    return { state, close: () => state.close() };
  }
  const url = config.cluster.redis;
  const redis = await connectRedis(url, "records", { name: `countd-cli:${config.cluster.node}`, ...opts }).catch((err: unknown) => {
    throw new RedisUnusable(`cannot reach Redis at ${shownUrl(url)} (cluster.redis): ${(err as Error).message}`, { cause: err });
  });
  try {
    const state = await StateStore.open(config.paths.state, { ...opts, history: new RedisRunHistory(redis, opts) });
    return {
      state,
      async close() {
        await state.close();
        await redis.quit().catch(() => redis.disconnect());
      },
    };
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}
