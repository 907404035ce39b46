import type { Redis } from "ioredis";
import type { ClusterConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import { errorText } from "../text.js";
import { RedisUnusable } from "./checks.js";
import { connectRedis, shownUrl, type ConnectionRole } from "./redis.js";

/**
 * A command's connection to the cluster's Redis (a `records` one unless said: a command fails at
 * once while Redis is away); RedisUnusable, which exits 78 with one line, when it cannot be reached.
 */
export async function commandRedis(settings: ClusterConfig, opts: { log?: Logger; role?: ConnectionRole } = {}): Promise<Redis> {
  const { role = "records", ...rest } = opts;
  return connectRedis(settings.redis, role, { name: `countd-cli:${settings.node}`, ...rest }).catch((err: unknown) => {
    throw new RedisUnusable(`cannot reach Redis at ${shownUrl(settings.redis)} (cluster.redis): ${errorText(err)}`, { cause: err });
  });
}

/** Lets go of a command's connection, dropping it when Redis is away. */
export async function closeCommandRedis(redis: Redis): Promise<void> {
  await redis.quit().catch(() => redis.disconnect());
}
