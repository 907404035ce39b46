import { readFileSync } from "node:fs";
import type { Server, ServerOptions } from "node:http";
import type { Logger } from "../log.js";

/**
 * The console's bounds on connections: a client that holds a connection open without finishing a
 * request must not keep it, and open connections must never take the descriptors the daemon needs
 * for its runs (run records, the spend file, the LLM's sockets).
 */
export const HTTP_TIMEOUTS = {
  /** A request's headers must arrive within this of the connection's first byte (or of its opening). */
  headersTimeout: 10_000,
  /** A whole request, headers and body, must arrive within this: a body trickled slower is cut with 408. */
  requestTimeout: 30_000,
  /** An idle kept-alive connection is closed after this. */
  keepAliveTimeout: 5_000,
  /** How often the two request bounds are checked: Node's default of 30 s would let a request run to 60 s. */
  connectionsCheckingInterval: 1_000,
} satisfies ServerOptions;

/** At most this many connections on each of the console's listeners, however high the descriptor limit. */
export const MAX_CONNECTIONS = 512;
/** Assumed when the limit cannot be read (no /proc): the soft limit most systems and systemd give. */
const ASSUMED_OPEN_FILES = 1_024;
/** A refused connection is logged at most this often: a flood of them must not flood the log. */
const DROP_LOG_EVERY_MS = 60_000;

/** The process's soft limit on open descriptors (RLIMIT_NOFILE), which Node has no call for: read from /proc. */
export function openFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)\s/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
    return line === undefined || line === "unlimited" ? undefined : Number(line);
  } catch {
    return undefined;
  }
}

/**
 * Connections each listener takes: a quarter of the descriptor limit, so the console's two
 * listeners together use at most half and the other half stays the daemon's own.
 */
export function connectionCap(limit: number): number {
  return Math.max(8, Math.min(MAX_CONNECTIONS, Math.floor(limit / 4)));
}

/** The cap by the limit read now; says so when the limit made it smaller. */
export function connectionCapNow(log: Logger): number {
  const limit = openFileLimit();
  const cap = connectionCap(limit ?? ASSUMED_OPEN_FILES);
  if (limit === undefined)
    log.warn({ cap, assumed: ASSUMED_OPEN_FILES }, "cannot read the open-file limit (no /proc/self/limits): the console assumes 1024");
  else if (cap < MAX_CONNECTIONS)
    log.warn(
      { cap, limit },
      `the open-file limit is ${limit}: the console takes at most ${cap} connections on each address (raise LimitNOFILE or ulimit -n for more)`,
    );
  return cap;
}

/** Refuses `server`'s connections past `cap`, logging the refusals at most once a minute. */
export function capConnections(server: Server, cap: number, log: Logger): void {
  server.maxConnections = cap;
  let lastLog = 0;
  server.on("drop", () => {
    const now = Date.now();
    if (now - lastLog < DROP_LOG_EVERY_MS) return;
    lastLog = now;
    log.warn({ cap }, `the console refused a connection: ${cap} are open on one address (more refusals in the next minute are not logged)`);
  });
}
