import { isNotConnectionError } from "bullmq";
import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "../log.js";
import { errorText } from "../text.js";

/**
 * What a connection is for, which decides what it does while Redis is away:
 * - `queues`: BullMQ's queues and workers; a command waits for Redis to be back (BullMQ requires
 *   `maxRetriesPerRequest: null` for workers, and a fire added during an outage is added late, not lost);
 * - `records`: run records; a command fails at once, so the runner keeps the record and saves it
 *   again later, as it does when the state directory cannot be written (and a stop is not held up);
 * - `probe`: the start-up checks, one attempt.
 */
export type ConnectionRole = "queues" | "records" | "probe";

const ROLE_OPTIONS: Record<ConnectionRole, RedisOptions> = {
  queues: { maxRetriesPerRequest: null },
  records: { maxRetriesPerRequest: 0, enableOfflineQueue: false },
  probe: { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null, connectTimeout: 5_000 },
};

/** The URL as it may be shown: without its password (the user name, if any, stays). */
export function shownUrl(url: string): string {
  const parsed = new URL(url);
  parsed.password = "";
  return parsed.toString();
}

/**
 * A connection to cluster.redis, connected: resolves once Redis answered, rejects if it cannot be
 * reached. After that ioredis reconnects on its own for as long as the daemon runs; the first
 * error of each outage is logged, and the reconnection.
 */
export async function connectRedis(url: string, role: ConnectionRole, opts: { name: string; log?: Logger }): Promise<Redis> {
  const client = new Redis(url, { ...ROLE_OPTIONS[role], lazyConnect: true, connectionName: opts.name });
  let away = false;
  /** Why connecting failed: connect() itself may only say that the connection closed (a refused password). */
  let lastError: unknown;
  // Without a listener ioredis prints every failed reconnection to the console.
  client.on("error", (err: unknown) => {
    lastError = err;
    if (away || role === "probe") return;
    away = true;
    opts.log?.warn({ redis: shownUrl(url), role, error: errorText(err) }, "lost the connection to Redis; reconnecting");
  });
  client.on("ready", () => {
    if (!away) return;
    away = false;
    opts.log?.info({ redis: shownUrl(url), role }, "connected to Redis again");
  });
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw lastError ?? err;
  }
  return client;
}

/**
 * Whether a queue's or worker's error is the connection going away, which the reconnection
 * already logs once: a socket error, or one BullMQ counts as a connection error. The client's
 * status is no guide, since a reset can be reported while it still reads "ready".
 */
export function lostConnection(err: Error): boolean {
  return (err as NodeJS.ErrnoException).syscall !== undefined || !isNotConnectionError(err);
}
