import { lstat, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { LiveMessage, Subscription } from "../console/protocol.js";
import type { Endpoint, LiveStream } from "./live-stream.js";
import { ADDRESS_FILE, readToken, SOCKET_FILE, tokenPath } from "../console/token.js";
import { isAlive } from "../store/lock.js";
import { NotRunning } from "./output.js";

/** A daemon that does not answer within this is treated as an error, not waited for forever. */
const PROBE_TIMEOUT_MS = 10_000;

/** The daemon answered with an error: its `{error}` message, with the HTTP status and body for callers that act on them. */
export class DaemonRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const message = (body as { error?: unknown } | undefined)?.error;
    super(typeof message === "string" ? message : `the daemon answered HTTP ${status}`);
  }
}

/** What console.json says: the running daemon's pid and where it listens. */
export interface DaemonAddress {
  pid: number;
  url?: string;
  socket?: string;
}

/** The running daemon, reached through its control socket or, failing that, its console's address and token. */
export interface Daemon {
  /** Resolves with the answer's JSON; an answer of 400 or more throws DaemonRefused. `body` is sent as JSON. */
  call<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T>;
  /** The live stream narrowed by `filter`, open once its replay is over (`live` received); every message goes to `onMessage`. */
  live(filter: Omit<Subscription, "type">, onMessage: (message: LiveMessage) => void): Promise<LiveStream>;
}

/**
 * The daemon running on `stateDir`, if one answers. The Unix socket comes first: only the state
 * directory's owner can open it and it needs no token. A socket or console.json left by a daemon
 * that was killed refuses connections, which says "not running".
 */
export async function findDaemon(stateDir: string): Promise<Daemon | undefined> {
  const socket = join(stateDir, SOCKET_FILE);
  if ((await mayListen(socket)) && (await answers({ socket }))) return daemonAt({ socket }, socket);
  const address = await readAddress(stateDir);
  if (!address?.url || !isAlive(address.pid)) return undefined;
  const token = await readToken(stateDir);
  if (!token)
    throw new Error(
      `the daemon (pid ${address.pid}) serves its console at ${address.url}, but ${tokenPath(stateDir)} cannot be read: run countd as the daemon's user`,
    );
  const endpoint = { url: new URL(address.url), token };
  return (await answers(endpoint)) ? daemonAt(endpoint, address.url) : undefined;
}

/** The running daemon, or NotRunning naming what needed it. */
export async function requireDaemon(stateDir: string, what: string): Promise<Daemon> {
  const daemon = await findDaemon(stateDir);
  if (!daemon) throw new NotRunning(`countd is not running with the state directory ${stateDir}: ${what} needs the daemon (countd start)`);
  return daemon;
}

export async function readAddress(stateDir: string): Promise<DaemonAddress | undefined> {
  try {
    const address = JSON.parse(await readFile(join(stateDir, ADDRESS_FILE), "utf8")) as DaemonAddress;
    return typeof address.pid === "number" ? address : undefined;
  } catch {
    return undefined;
  }
}

/** `via`: the socket's path or the console's address, for messages. */
function daemonAt(endpoint: Endpoint, via: string): Daemon {
  return {
    call: async <T>(method: "GET" | "POST", path: string, sent?: unknown) => {
      const { status, body } = await send(endpoint, method, path, undefined, sent);
      if (status >= 400) throw new DaemonRefused(status, body);
      if (body === undefined) throw new Error(`${via} answered ${method} ${path} with no JSON (HTTP ${status}): is it countd?`);
      return body as T;
    },
    // Only `run` and `follow` stream; ws loads when they do, not with every command that asks the daemon.
    live: async (filter, onMessage) => (await import("./live-stream.js")).openLive(endpoint, filter, onMessage),
  };
}

/**
 * False when no socket file is there: no daemon listens on it, which is learnt without a connection
 * (an HTTP client costs countd status, run with no daemon, several milliseconds for nothing).
 */
async function mayListen(socket: string): Promise<boolean> {
  return lstat(socket).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== "ENOENT",
  );
}

/** Whether a daemon answers there; a socket file that is another user's is said so rather than taken for no daemon. */
async function answers(endpoint: Endpoint): Promise<boolean> {
  try {
    const { status, body } = await send(endpoint, "GET", "/api/session", PROBE_TIMEOUT_MS);
    if (status === 401 && body !== undefined) throw new DaemonRefused(status, body);
    return status === 200 && body !== undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ECONNREFUSED" || code === "ENOENT") return false;
    if (code === "EACCES" && "socket" in endpoint) {
      throw new Error(
        `cannot open the control socket ${endpoint.socket}: permission denied (it is the daemon's user's alone: run countd as that user)`,
      );
    }
    throw err;
  }
}

async function send(
  endpoint: Endpoint,
  method: string,
  path: string,
  timeoutMs?: number,
  sent?: unknown,
): Promise<{ status: number; body: unknown }> {
  const { request } = await import("node:http");
  return new Promise((resolve, reject) => {
    const json = sent === undefined ? undefined : JSON.stringify(sent);
    const headers = {
      ...("socket" in endpoint ? {} : { authorization: `Bearer ${endpoint.token}` }),
      ...(json !== undefined ? { "content-type": "application/json" } : {}),
    };
    const target =
      "socket" in endpoint
        ? { socketPath: endpoint.socket }
        : { host: endpoint.url.hostname.replace(/^\[|\]$/g, ""), port: endpoint.url.port };
    const req = request({ ...target, headers, method, path, ...(timeoutMs ? { timeout: timeoutMs } : {}) }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: parseJson(text) }));
    });
    req.on("timeout", () => req.destroy(new Error(`the daemon did not answer ${method} ${path} within ${timeoutMs! / 1000} s`)));
    req.on("error", reject);
    req.end(json);
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
