import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { vi } from "vitest";
import WebSocket from "ws";
import { startDaemon, type Daemon } from "../../src/daemon.js";
import type { LiveMessage } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { captureLog, type LogLine } from "./log-capture.js";

/*
 * A real daemon started in this process (src/daemon.ts startDaemon) with its console on a free
 * loopback port, and the clients a user or a script would use against it: fetch, raw HTTP (for a
 * forged Host header and the Unix socket) and `ws` WebSockets.
 */

export const SLOW = { timeout: 20_000, interval: 100 };

export interface ConsoleDaemon {
  dir: string;
  daemon: Daemon;
  /** http://127.0.0.1:<port> */
  origin: string;
  /** 127.0.0.1:<port>: what a browser sends as Host. */
  host: string;
  port: number;
  token: string;
  /** The control socket's path. */
  socket: string;
  log: LogLine[];
  /** fetch with the bearer token. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** GET with the bearer token, the JSON answer (throws on a status other than 200). */
  get<T = any>(path: string): Promise<T>;
  /** POST with the bearer token: status and JSON. */
  post<T = any>(path: string): Promise<{ status: number; body: T }>;
  stop(): Promise<void>;
}

/**
 * A temporary countd folder with countd.yaml and jobs/: the console on 127.0.0.1:0 unless
 * `console` gives the section's lines, `runner` lines beside shutdown_grace, and `extra` top-level lines.
 */
export async function consoleFolder(opts: { console?: string; runner?: string; extra?: string } = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "countd-console-"));
  await mkdir(join(dir, "jobs"));
  await mkdir(join(dir, "workspace"));
  const yaml = [
    `console:\n${opts.console ?? '  listen: "127.0.0.1:0"\n'}`,
    `runner:\n  shutdown_grace: 1s\n${opts.runner ?? ""}`,
    "tools:\n  exec:\n    sandbox: none\n",
    opts.extra ?? "",
  ].join("");
  await writeFile(join(dir, "countd.yaml"), yaml);
  return dir;
}

export async function writeJob(dir: string, name: string, yaml: string): Promise<void> {
  await writeFile(join(dir, "jobs", `${name}.yaml`), yaml);
}

export async function startConsoleDaemon(dir: string, env: Record<string, string>): Promise<ConsoleDaemon> {
  const { log, lines } = captureLog();
  const daemon = await startDaemon({ configFile: join(dir, "countd.yaml"), env: { PATH: process.env["PATH"] ?? "", ...env }, logger: log });
  const token = (await readFile(join(daemon.config.paths.state, "console.token"), "utf8")).trim();
  const url = daemon.console.url ? new URL(daemon.console.url) : undefined;
  const port = url ? Number(url.port) : 0;
  const origin = url ? `http://${url.host}` : "";
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${origin}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string> | undefined) },
    });
  let stopped = false;
  return {
    dir,
    daemon,
    origin,
    host: url?.host ?? "",
    port,
    token,
    socket: join(daemon.config.paths.state, "countd.sock"),
    log: lines,
    api,
    async get(path) {
      const response = await api(path);
      const body = await response.json();
      if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${JSON.stringify(body)}`);
      return body;
    },
    async post(path) {
      const response = await api(path, { method: "POST" });
      return { status: response.status, body: await response.json() };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await daemon.stop();
    },
  };
}

/** Every daemon a test started is stopped after it, and its folder removed. */
export function daemonsOf(): { started: ConsoleDaemon[]; cleanup(): Promise<void> } {
  const started: ConsoleDaemon[] = [];
  return {
    started,
    async cleanup() {
      for (const running of started.splice(0)) {
        await running.stop();
        await rm(running.dir, { recursive: true, force: true, maxRetries: 5 });
      }
    },
  };
}

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: any;
}

/** One HTTP request through node:http, which sends the Host header as given, over TCP or the Unix socket. */
export function raw(opts: {
  port?: number;
  socketPath?: string;
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Another loopback address to send from (127.0.0.0/8): the console counts failed tokens per address. */
  localAddress?: string;
}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        ...(opts.socketPath
          ? { socketPath: opts.socketPath }
          : { host: "127.0.0.1", port: opts.port, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) }),
        method: opts.method ?? "GET",
        path: opts.path,
        headers: opts.headers,
        setHost: opts.headers?.["host"] === undefined && opts.headers?.["Host"] === undefined,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

export interface LiveClient {
  ws: WebSocket;
  messages: LiveMessage[];
  /** Resolves with the first message (from the start) matching, waiting for it. */
  next(match: (message: LiveMessage) => boolean, what?: string): Promise<LiveMessage>;
  close(): void;
}

export type Opened = { ok: true; client: LiveClient } | { ok: false; status?: number; error?: string };

/**
 * A `ws` WebSocket to the console's live stream: opened (messages gathered from the first) or
 * refused with the HTTP status of the refusal.
 */
export function openLive(url: string, options: WebSocket.ClientOptions = {}): Promise<Opened> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, options);
    const messages: LiveMessage[] = [];
    ws.on("message", (data) => messages.push(JSON.parse(data.toString()) as LiveMessage));
    ws.on("unexpected-response", (_req, res) => {
      resolve({ ok: false, status: res.statusCode });
      res.resume();
      ws.terminate();
    });
    ws.on("error", (err) => resolve({ ok: false, error: err.message }));
    ws.on("open", () => {
      const client: LiveClient = {
        ws,
        messages,
        next: (match, what = "a matching message") =>
          vi.waitFor(() => {
            const found = messages.find(match);
            if (!found) throw new Error(`no ${what} yet among ${messages.map((m) => m.type).join(", ")}`);
            return found;
          }, SLOW),
        close: () => ws.close(),
      };
      resolve({ ok: true, client });
    });
  });
}

/** The run record once it has ended, as the API shows it. */
export async function endedRun(console: ConsoleDaemon, id: string, job?: string): Promise<RunRecord> {
  let run: RunRecord | undefined;
  await vi.waitFor(async () => {
    const view = await console.get<{ run: RunRecord }>(`/api/runs/${id}${job ? `?job=${job}` : ""}`);
    if (view.run.status === "running") throw new Error(`run ${id} still running`);
    run = view.run;
  }, SLOW);
  return run!;
}

/** A promise the test resolves: an LLM answer held until the test lets it go. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
