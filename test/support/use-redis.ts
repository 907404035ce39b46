import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll } from "vitest";
import { connectRedis, type ConnectionRole } from "../../src/cluster/redis.js";
import { startRedis, type RedisServer } from "./redis-server.js";

export interface TestRedis {
  /** The real redis-server, started before the describe block's tests. */
  readonly server: RedisServer;
  /** The server's URL. */
  readonly url: string;
  /** A connection as `role` to `url` (the server's unless given), disconnected after the test. */
  connect(role?: ConnectionRole, url?: string): Promise<Redis>;
}

/**
 * A real redis-server (startRedis) for the enclosing describe block: started before its tests,
 * stopped after them. The connections a test made are disconnected after the after-hooks
 * registered later than this call (vitest runs after-hooks last registered first), so a test's own
 * afterEach may still use them, to stop what runs on them or to flush Redis.
 */
export function useRedis(): TestRedis {
  let server: RedisServer;
  const connections: Redis[] = [];

  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });
  afterEach(() => {
    for (const connection of connections.splice(0)) connection.disconnect();
  });

  return {
    get server() {
      return server;
    },
    get url() {
      return server.url;
    },
    async connect(role: ConnectionRole = "records", url = server.url) {
      const connection = await connectRedis(url, role, { name: "countd-test" });
      connections.push(connection);
      return connection;
    },
  };
}
