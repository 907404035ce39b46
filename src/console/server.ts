import { SettingUnusable } from "../config/errors.js";
import { chmod, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { Logger } from "../log.js";
import { errorText } from "../text.js";
import { consoleApp, type ConsoleDeps } from "./api.js";
import { loadAssets } from "./assets.js";
import { capConnections, connectionCapNow, HTTP_TIMEOUTS } from "./connections.js";
import { Guard } from "./guard.js";
import { hookJob, serveHook } from "./hooks.js";
import type { Subscription } from "./protocol.js";
import { ADDRESS_FILE, readOrCreateToken, SOCKET_FILE } from "./token.js";

/** A client message larger than this is no subscription: the connection is closed. */
const MAX_CLIENT_MESSAGE = 4_096;
/** A client that has not answered a ping within this is gone (a laptop closed mid-stream). */
const PING_EVERY_MS = 30_000;
/** The longest path a Unix socket can have on Linux (sun_path, 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;

/** The console could not listen where configured: one line for the operator, exit 78 (EX_CONFIG). */
export class ConsoleListenError extends SettingUnusable {}

export interface ConsoleServer {
  /** The page's address, without the token; undefined with console.enabled: false. */
  url?: string;
  /** The control channel's path; undefined when the state directory's path is too long for one. */
  socket?: string;
  close(): Promise<void>;
}

/**
 * Serves the console: the page and its API on console.listen (unless console.enabled is false),
 * and the same API on the control socket in the state directory for countd's own commands, which
 * need no token there: the socket is the owner's alone (mode 0600). The live stream is at
 * /api/ws on both.
 */
export async function startConsole(deps: ConsoleDeps, log: Logger): Promise<ConsoleServer> {
  const config = deps.config();
  const stateDir = config.paths.state;
  const token = await readOrCreateToken(stateDir);
  const assets = await loadAssets();
  const servers: Server[] = [];
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_CLIENT_MESSAGE });
  const result: ConsoleServer = { close: async () => {} };
  let port = 0;
  const cap = connectionCapNow(log);

  const serve = (trusted: boolean) => {
    const guard = new Guard({ token, trusted, allowRemote: config.console.allowRemote, port: () => port });
    // Loaded at the first request: @hono/node-server reads globalThis.Headers as it loads, which
    // makes Node load its fetch implementation, some 20 ms of every start-up.
    let app: Promise<(req: IncomingMessage, res: ServerResponse) => unknown> | undefined;
    const handler = () =>
      (app ??= import("@hono/node-server").then(({ getRequestListener }) => getRequestListener(consoleApp(deps, guard, assets).fetch)));
    const server = createServer(HTTP_TIMEOUTS, (req, res) => {
      const job = hookJob(req);
      if (job === undefined)
        return void handler().then(
          (handle) => handle(req, res),
          (err: unknown) => {
            log.error({ error: errorText(err) }, "the console's request handler could not be loaded");
            res.writeHead(500).end();
          },
        );
      void serveHook(req, res, job, guard, deps.hooks);
    });
    server.on("upgrade", (req, socket, head) => {
      // Nothing else listens for errors on a socket handed over for an upgrade: a client that resets mid-handshake would stop the daemon.
      socket.on("error", () => socket.destroy());
      try {
        upgrade(req, socket, head, guard);
      } catch {
        // A request line no URL can be made of (GET http://[ …): an answer, not an exception that stops the daemon.
        refuseUpgrade(socket, 400, "Bad Request");
      }
    });
    capConnections(server, cap, log);
    servers.push(server);
    return server;
  };

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, guard: Guard) => {
    const url = new URL(req.url ?? "/", "http://console");
    const host = req.headers.host;
    const refuse = (status: number, why: string) => refuseUpgrade(socket, status, why);
    if (url.pathname !== "/api/ws") return refuse(404, "Not Found");
    if (!guard.hostAllowed(host)) return refuse(403, "Forbidden");
    const credential = guard.credential(req.headers);
    if (!credential) {
      // Slowed down like a wrong token on the API: the WebSocket is no way around it.
      const wait = guard.failed(req.socket.remoteAddress ?? "local");
      if (wait > 0) setTimeout(() => refuse(401, "Unauthorized"), wait);
      else refuse(401, "Unauthorized");
      return;
    }
    // Cross-site WebSocket hijacking: a page elsewhere can open a socket that carries the cookie, but not with our Origin.
    if (!guard.originAllowed(req.headers.origin, host, credential === "cookie")) return refuse(403, "Forbidden");
    sockets.handleUpgrade(req, socket, head, (ws) =>
      attach(ws, {
        ...(url.searchParams.get("run") ? { run: url.searchParams.get("run")! } : {}),
        ...(url.searchParams.get("job") ? { job: url.searchParams.get("job")! } : {}),
      }),
    );
  };

  const attach = (ws: WebSocket, filter: Omit<Subscription, "type">) => {
    const client = deps.live.connect(ws, filter);
    let alive = true;
    ws.on("pong", () => (alive = true));
    const ping = setInterval(() => {
      if (!alive) return ws.terminate();
      alive = false;
      ws.ping();
    }, PING_EVERY_MS);
    ws.on("message", (data, isBinary) => {
      const subscription = isBinary ? undefined : parseSubscription(data.toString());
      if (!subscription) return ws.close(1003, 'expected {"type":"subscribe","run"?:"<run id>","job"?:"<job>"}');
      client.subscribe(subscription);
    });
    ws.on("error", () => ws.terminate());
    ws.on("close", () => {
      clearInterval(ping);
      client.close();
    });
  };

  if (config.console.enabled) {
    const { host, port: wanted } = config.console.listen;
    const server = serve(false);
    await listen(server, () => server.listen(wanted, host)).catch((err: NodeJS.ErrnoException) => {
      throw new ConsoleListenError(
        err.code === "EADDRINUSE"
          ? `console.listen ${hostPort(host, wanted)}: the port is in use (another countd, or another program); choose another port, or 0 for a free one`
          : `console.listen ${hostPort(host, wanted)}: cannot listen there: ${err.message}`,
      );
    });
    port = (server.address() as AddressInfo).port;
    result.url = `http://${hostPort(host, port)}/`;
    if (config.console.allowRemote)
      log.warn(
        { url: result.url },
        "the console listens beyond this machine (console.allow_remote): put it behind a reverse proxy with TLS",
      );
  }

  const socketPath = join(stateDir, SOCKET_FILE);
  if (Buffer.byteLength(socketPath) <= MAX_SOCKET_PATH) {
    const server = serve(true);
    // A socket file left by a daemon that died: this daemon holds the state lock, so it is no one's.
    await rm(socketPath, { force: true });
    await listen(server, () => server.listen(socketPath));
    await chmod(socketPath, 0o600);
    result.socket = socketPath;
  } else {
    log.warn(
      { path: socketPath },
      "the state directory's path is too long for a Unix socket: countd's commands reach the daemon through the console's address and token instead",
    );
  }

  const addressFile = join(stateDir, ADDRESS_FILE);
  await writeFile(
    addressFile,
    `${JSON.stringify({ pid: process.pid, ...(result.url ? { url: result.url } : {}), ...(result.socket ? { socket: result.socket } : {}) })}\n`,
    { mode: 0o600 },
  );
  if (result.url) log.info({ url: result.url }, "console listening (countd console prints the address to sign in with)");

  result.close = async () => {
    for (const ws of sockets.clients) ws.close(1001, "countd is stopping");
    sockets.close();
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      ),
    );
    await rm(addressFile, { force: true });
    if (result.socket) await rm(result.socket, { force: true });
  };
  return result;
}

function refuseUpgrade(socket: Duplex, status: number, why: string): void {
  if (!socket.destroyed) socket.end(`HTTP/1.1 ${status} ${why}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

function listen(server: Server, start: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.once("listening", () => {
      server.off("error", reject);
      resolve();
    });
    start();
  });
}

function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

function parseSubscription(text: string): Omit<Subscription, "type"> | undefined {
  try {
    const value = JSON.parse(text) as Partial<Subscription>;
    if (value?.type !== "subscribe") return undefined;
    const run = typeof value.run === "string" ? value.run : undefined;
    const job = typeof value.job === "string" ? value.job : undefined;
    return { ...(run ? { run } : {}), ...(job ? { job } : {}) };
  } catch {
    return undefined;
  }
}
