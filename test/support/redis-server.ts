import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeServer, listenLoopback } from "./loopback.js";

/** Debian's redis-server (package redis-server), which SYSTEM_PACKAGES checks for. */
export const REDIS_SERVER = "/usr/bin/redis-server";

export interface RedisServer {
  /** `redis://127.0.0.1:<port>/0`. */
  url: string;
  port: number;
  /** Its data directory (the append-only file is there). */
  dir: string;
  /** Everything it printed so far. */
  output: () => string;
  /** SIGTERM, then removes the data directory. */
  stop(): Promise<void>;
}

/** A port nothing listens on now: taken from the kernel, then let go (a race a test run can live with). */
export async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listenLoopback(server);
  await closeServer(server);
  return port;
}

/**
 * A real redis-server of its own on a free loopback port, with a temporary data directory, no RDB
 * snapshots and the append-only file on (as the README asks of a cluster's Redis); `args` adds
 * settings such as `--maxmemory-policy allkeys-lru`; `port`: a given one (a Redis back after an
 * outage). Resolves once it accepts connections.
 */
export async function startRedis(args: string[] = [], opts: { port?: number } = {}): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), "countd-redis-"));
  const port = opts.port ?? (await freePort());
  const child: ChildProcess = spawn(REDIS_SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "yes", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  await new Promise<void>((resolve, reject) => {
    const started = Date.now();
    const look = setInterval(() => {
      if (output.includes("Ready to accept connections")) {
        clearInterval(look);
        resolve();
      } else if (child.exitCode !== null || Date.now() - started > 10_000) {
        clearInterval(look);
        reject(new Error(`redis-server did not start on port ${port}:\n${output}`));
      }
    }, 20);
  });
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    dir,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
