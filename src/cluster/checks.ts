import { SettingUnusable } from "../config/errors.js";
import type { Redis } from "ioredis";
import { errorText } from "../text.js";
import { connectRedis, shownUrl } from "./redis.js";

/** The oldest Redis the cluster runs on: BullMQ 6 starts on 5, but its current scripts and commands assume 6.2. */
export const MIN_REDIS_VERSION = [6, 2] as const;

/**
 * Redis cannot serve as the cluster's: unreachable, or too old. A start that meets it exits 78
 * (EX_CONFIG), which systemd's unit does not restart in a loop: someone has to act.
 */
export class RedisUnusable extends SettingUnusable {
  override readonly name = "RedisUnusable";
}

/**
 * Before a daemon joins the cluster: Redis answers and is recent enough, or RedisUnusable says
 * why not, in one line naming the URL without its password. What is worth fixing but does not stop
 * the start (an eviction policy that may drop the queues' keys) comes back as warnings.
 */
export async function checkRedis(url: string): Promise<{ warnings: string[] }> {
  const shown = shownUrl(url);
  let client: Redis;
  try {
    client = await connectRedis(url, "probe", { name: "countd-probe" });
  } catch (err) {
    throw new RedisUnusable(`cannot reach Redis at ${shown} (cluster.redis): ${errorText(err)}`, { cause: err });
  }
  try {
    const version = /^redis_version:(\S+)/m.exec(await client.info("server"))?.[1];
    if (version === undefined || olderThan(version, MIN_REDIS_VERSION)) {
      throw new RedisUnusable(
        `Redis at ${shown} is version ${version ?? "unknown"}; countd's cluster needs Redis ${MIN_REDIS_VERSION.join(".")} or later`,
      );
    }
    return { warnings: [await evictionWarning(client, shown)].filter((line): line is string => line !== undefined) };
  } catch (err) {
    if (err instanceof RedisUnusable) throw err;
    throw new RedisUnusable(`Redis at ${shown} (cluster.redis) did not answer countd's checks: ${errorText(err)}`, { cause: err });
  } finally {
    client.disconnect();
  }
}

/**
 * BullMQ needs `noeviction`: under another policy Redis may drop a queued fire, a lock or a run
 * record when memory runs short. CONFIG may be renamed or refused (hosted Redis, ACLs): then the
 * warning says it could not be checked.
 */
async function evictionWarning(client: Redis, shown: string): Promise<string | undefined> {
  let policy: string | undefined;
  try {
    const reply = (await client.config("GET", "maxmemory-policy")) as unknown;
    policy = Array.isArray(reply) && typeof reply[1] === "string" ? reply[1] : undefined;
  } catch (err) {
    return `could not check Redis's maxmemory-policy at ${shown} (${errorText(err)}); it must be noeviction, or Redis may drop the cluster's queued fires and run records when memory runs short`;
  }
  if (policy === "noeviction") return undefined;
  return `Redis at ${shown} has maxmemory-policy ${policy ?? "unknown"}, not noeviction: it may drop the cluster's queued fires and run records when memory runs short (set maxmemory-policy noeviction)`;
}

/** "7.0.15" against [6, 2]; a part that is not a number counts as 0. */
function olderThan(version: string, min: readonly number[]): boolean {
  const parts = version.split(".").map((part) => Number.parseInt(part, 10) || 0);
  for (const [i, part] of min.entries()) {
    const have = parts[i] ?? 0;
    if (have !== part) return have < part;
  }
  return false;
}
