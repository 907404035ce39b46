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
  /** Everything it printed so far, over every start. */
  output: () => string;
  /** Ends the server with `signal`, keeping its data directory for restart(); resolves once it exited. */
  kill(signal: "SIGKILL" | "SIGTERM"): Promise<void>;
  /** Starts it again on the same port and data directory (it loads the append-only file); resolves once it accepts connections. */
  restart(): Promise<void>;
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
 * snapshots and the append-only file on, fsynced at every write (as the README asks of a cluster's
 * Redis: with `everysec`, a redis-server SIGKILLed on a loaded machine lost a slot it had just
 * taken, and the slot ran twice); `args` adds settings such as `--maxmemory-policy allkeys-lru`; `port`: a given one (a
 * Redis back after an outage). Resolves once it accepts connections.
 */
export async function startRedis(args: string[] = [], opts: { port?: number } = {}): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), "countd-redis-"));
  const port = opts.port ?? (await freePort());
  const settings = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    ...args,
  ];
  let output = "";
  let child: ChildProcess;
  let exited: Promise<void>;

  async function launch(): Promise<void> {
    const printed = output.length;
    child = spawn(REDIS_SERVER, settings, { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    exited = new Promise<void>((done) => child.once("exit", () => done()));
    await new Promise<void>((resolve, reject) => {
      const started = Date.now();
      const look = setInterval(() => {
        if (output.slice(printed).includes("Ready to accept connections")) {
          clearInterval(look);
          resolve();
        } else if (child.exitCode !== null || child.signalCode !== null || Date.now() - started > 10_000) {
          clearInterval(look);
          reject(new Error(`redis-server did not start on port ${port}:\n${output.slice(printed)}`));
        }
      }, 20);
    });
  }

  async function kill(signal: "SIGKILL" | "SIGTERM"): Promise<void> {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  }

  await launch();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    dir,
    output: () => output,
    kill,
    restart: launch,
    async stop() {
      await kill("SIGTERM");
      await rm(dir, { recursive: true, force: true });
    },
  };
}
