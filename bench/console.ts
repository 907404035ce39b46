/**
 * The web console (issue 13).
 * (a) Live latency: a daemon started in this process streams answers from an LLM on loopback to
 *     WebSocket clients; both the LLM and the clients live in a child process
 *     (bench/console-clients.ts), so their work does not share the daemon's event loop. Each chunk
 *     carries a number in its text; this process notes when the daemon's event bus emits it, each
 *     client when it reads it, both on CLOCK_MONOTONIC (process.hrtime), which every process on the
 *     machine shares. 1 client and 50, phase by phase in alternating order.
 * (b) Idle cost: the built daemon (`node bin/countd.js start`) with the console and the same daemon
 *     with `console.enabled: false`, pairs of them running side by side over the same window once
 *     each has given back the heap start-up grew, no client connected; RSS and CPU time from /proc.
 * (c) The overview with 1,000 jobs and 10,000 runs: the built daemon; the API's response sizes and
 *     times, and the page in headless Chromium from the sign-in address until its jobs table holds
 *     every job.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startDaemon } from "../src/daemon.js";
import { EventBus, type CountdEvents, type EventName } from "../src/events.js";
import { silentLogger } from "../src/log.js";
import type { RunRecord, RunStatus } from "../src/store/run-record.js";
import { stopCountd } from "./daemon.js";
import { CHUNK_NUMBER, hrtimeMs, type ClientsOptions, type FromClients, type ToClients } from "./console-clients.js";
import { median, percentile } from "./stats.js";

const BIN = fileURLToPath(new URL("../bin/countd.js", import.meta.url));
const CLIENTS = fileURLToPath(new URL("./console-clients.ts", import.meta.url));
const CHROMIUM = "/usr/bin/chromium";
const START_TIMEOUT_MS = 60_000;
/** countd logs "countd started" before it installs its SIGTERM handler (src/cli/start.ts). */
const BEFORE_SIGTERM_MS = 250;

/** A fast model's pace: 200 chunks a second, each a few characters, as providers send them. */
const LIVE: ClientsOptions = { chunksPerAnswer: 200, chunkEveryMs: 5 };
const CLIENT_COUNTS = [1, 50] as const;
const LIVE_ROUNDS = 3;
const RUNS_PER_PHASE = 2;

const IDLE_PAIRS = 3;
const IDLE_JOBS = 100;
/**
 * V8's memory reducer gives back the heap start-up grew with "Mark-Compact (reduce)" GCs (some
 * 25 MB of RSS, and most of an idle daemon's CPU time) at a moment of its own, from 30 to 110 s
 * after start in these runs: one daemon measured before them and one after would differ by them,
 * not by the console. So the daemons run with --trace-gc, and the window opens once each has
 * reduced and then printed nothing for IDLE_QUIET_MS.
 */
const IDLE_QUIET_MS = 5_000;
const IDLE_SETTLE_TIMEOUT_MS = 120_000;
const IDLE_WINDOW_MS = 20_000;

const OVERVIEW_JOBS = 1000;
const RUNS_PER_JOB = 10;
const REQUESTS = 7;
const RENDERS = 3;
const RENDER_TIMEOUT_MS = 30_000;
/** The overview's jobs table, one row per job; an invalid file's problems take a row of their own (console/overview.js). */
const JOB_ROWS = "table.jobs tbody tr:not(.problems-row)";
const DAY_MS = 24 * 60 * 60_000;

const children = new Set<ChildProcess>();
// A bench that throws half-way must not leave a daemon or the clients running behind it.
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

async function countdHome(prefix: string, config: string): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), `countd-bench-console-${prefix}-`));
  // No bwrap probe at start-up: it is the sandbox's cost, not the console's, and logs a warning.
  await writeFile(join(home, "countd.yaml"), `timezone: UTC\ntools:\n  exec:\n    sandbox: none\n${config}`);
  await mkdir(join(home, "jobs"));
  return home;
}

/** A free port: neither failing nor taking 7420 beside a real daemon (see COUNTD_CONSOLE_LISTEN). */
const FREE_PORT = { COUNTD_CONSOLE_LISTEN: "127.0.0.1:0" };

export interface LatencyFigures {
  clients: number;
  /** Chunks read, summed over the clients. */
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /**
   * How long the bus's listeners took per chunk, the console's sends to every client among them:
   * the daemon's own share of the latency; the rest is the kernel, the client and the scheduler.
   */
  listenersP50Ms: number;
  listenersP99Ms: number;
}

export interface ConsoleLatencyResult extends ClientsOptions {
  byClients: LatencyFigures[];
}

/**
 * The daemon does not hand out its event bus: its emit is where a chunk leaves the loop, so the
 * time is taken there, before any listener (the console's among them) runs.
 */
function noteChunks(emitted: Map<number, number>, listenersMs: number[]): () => void {
  const emit = EventBus.prototype.emit;
  EventBus.prototype.emit = function <K extends EventName>(this: EventBus, name: K, payload: CountdEvents[K]) {
    if (name !== "answer.chunk") return emit.call(this, name, payload);
    const at = hrtimeMs();
    for (const [, n] of (payload as CountdEvents["answer.chunk"]).text.matchAll(CHUNK_NUMBER)) emitted.set(Number(n), at);
    emit.call(this, name, payload);
    listenersMs.push(hrtimeMs() - at);
  };
  return () => {
    EventBus.prototype.emit = emit;
  };
}

/** The clients' process, and a way to send it a message and await its answer of that type. */
async function startClients(): Promise<{
  ask: <T extends FromClients["type"]>(message: ToClients | undefined, answer: T) => Promise<Extract<FromClients, { type: T }>>;
  stop: () => Promise<void>;
}> {
  const child = spawn(process.execPath, ["--import", "tsx", CLIENTS, JSON.stringify(LIVE)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.add(child);
  const exited = once(child, "exit").finally(() => children.delete(child));
  const ask = <T extends FromClients["type"]>(message: ToClients | undefined, answer: T) =>
    new Promise<Extract<FromClients, { type: T }>>((resolve, reject) => {
      const onMessage = (reply: FromClients) => {
        if (reply.type !== answer && reply.type !== "error") return;
        child.off("message", onMessage).off("exit", onExit);
        if (reply.type === "error") reject(new Error(`bench/console-clients: ${reply.message}`));
        else resolve(reply as Extract<FromClients, { type: T }>);
      };
      const onExit = (code: number | null) => reject(new Error(`bench/console-clients exited (code ${code}) before answering ${answer}`));
      child.on("message", onMessage).once("exit", onExit);
      if (message) child.send(message);
    });
  return {
    ask,
    stop: async () => {
      if (child.connected) child.send({ type: "stop" } satisfies ToClients);
      await exited;
    },
  };
}

export async function benchConsoleLatency(): Promise<ConsoleLatencyResult> {
  const home = await countdHome("live", "");
  await writeFile(join(home, "jobs", "stream.yaml"), "prompt: Tell the story.\ntools: []\n");
  const clients = await startClients();
  const emitted = new Map<number, number>();
  const listenersMs: number[] = [];
  const restore = noteChunks(emitted, listenersMs);
  try {
    const { baseURL } = await clients.ask(undefined, "ready");
    const daemon = await startDaemon({
      configFile: join(home, "countd.yaml"),
      env: { ...process.env, OPENAI_API_KEY: "sk-bench", OPENAI_BASE_URL: baseURL, ...FREE_PORT },
      logger: silentLogger,
    });
    try {
      const url = daemon.console.url!;
      const token = (await readFile(join(daemon.config.paths.state, "console.token"), "utf8")).trim();
      const phase = async (count: number): Promise<{ latencies: number[]; listeners: number[] }> => {
        await clients.ask({ type: "clients", url, token, count }, "clients");
        emitted.clear();
        listenersMs.length = 0;
        for (let i = 0; i < RUNS_PER_PHASE; i++) {
          const run = (await daemon.runner.request({ job: "stream", reason: "manual", scheduledAt: new Date() }).ended).record;
          if (run.status !== "ok") throw new Error(`bench/console: the streaming run ended ${run.status}: ${run.error}`);
        }
        const { receipts } = await clients.ask({ type: "collect", runs: RUNS_PER_PHASE }, "receipts");
        const latencies: number[] = [];
        for (const read of receipts) {
          if (read.length / 2 !== emitted.size)
            throw new Error(`bench/console: a client read ${read.length / 2} of the ${emitted.size} chunks emitted`);
          for (let i = 0; i < read.length; i += 2) latencies.push(read[i + 1]! - emitted.get(read[i]!)!);
        }
        // A chunk read before it was emitted would mean the two processes' clocks disagree, and every figure with them.
        if (latencies.some((ms) => ms < 0))
          throw new Error("bench/console: a client read a chunk before the bus emitted it; CLOCK_MONOTONIC is not shared");
        return { latencies, listeners: [...listenersMs] };
      };
      // Warm-up: the first run compiles the loop's, the console's and ws's paths.
      await phase(1);
      const all = new Map(CLIENT_COUNTS.map((count) => [count, { latencies: [] as number[], listeners: [] as number[] }]));
      for (let round = 0; round < LIVE_ROUNDS; round++) {
        // Alternating which goes first, so neither always runs right after connecting the clients.
        for (const count of round % 2 === 0 ? CLIENT_COUNTS : [...CLIENT_COUNTS].reverse()) {
          const { latencies, listeners } = await phase(count);
          all.get(count)!.latencies.push(...latencies);
          all.get(count)!.listeners.push(...listeners);
        }
      }
      const byClients = [...all].map(([count, { latencies, listeners }]): LatencyFigures => {
        const sorted = latencies.sort((a, b) => a - b);
        return {
          clients: count,
          samples: sorted.length,
          p50Ms: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          maxMs: sorted.at(-1)!,
          listenersP50Ms: percentile(
            listeners.sort((a, b) => a - b),
            0.5,
          ),
          listenersP99Ms: percentile(listeners, 0.99),
        };
      });
      return { ...LIVE, byClients };
    } finally {
      await daemon.stop();
    }
  } finally {
    restore();
    await clients.stop();
    await rm(home, { recursive: true, force: true });
  }
}

interface Started {
  child: ChildProcess;
  home: string;
  output: () => string;
  /** performance.now() when it last wrote to stdout or stderr. */
  lastOutputAt: () => number;
}

/** `countd start` in `home`, node given `nodeArgs`; resolves when it logs "countd started" having loaded all `jobs`. */
async function startCountd(home: string, jobs: number, nodeArgs: string[] = []): Promise<Started> {
  const child = spawn(process.execPath, [...nodeArgs, BIN, "start"], {
    cwd: home,
    // Nothing listens on the discard port: a job that fired by mistake would fail, and show in the history.
    env: { ...process.env, OPENAI_API_KEY: "sk-unused", OPENAI_BASE_URL: "http://127.0.0.1:9/v1", COUNTD_LOG_LEVEL: "info", ...FREE_PORT },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  let output = "";
  let lastOutputAt = performance.now();
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      lastOutputAt = performance.now();
    });
  }
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`countd did not log "countd started" within ${START_TIMEOUT_MS / 1000} s:\n${output}`)),
      START_TIMEOUT_MS,
    );
    child.stdout!.on("data", () => {
      const line = output
        .split("\n")
        .slice(0, -1)
        .find((l) => l.includes('"countd started"'));
      if (!line) return;
      clearTimeout(timer);
      const loaded = (JSON.parse(line) as { jobs?: number }).jobs;
      if (loaded === jobs) resolve();
      else reject(new Error(`countd started with ${loaded} jobs, not the ${jobs} written:\n${output}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`countd exited (${signal ?? `code ${code}`}) before it started:\n${output}`));
    });
  }).catch(async (err: unknown) => {
    await stopCountd({ child, output: () => output }).catch(() => {});
    throw err;
  });
  return { child, home, output: () => output, lastOutputAt: () => lastOutputAt };
}

/** utime + stime of `pid`, in clock ticks (proc(5): fields 14 and 15; the name in field 2 may hold spaces). */
async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

async function rssMb(pid: number): Promise<number> {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(await readFile(`/proc/${pid}/status`, "utf8"));
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) / 1024;
}

export interface IdleArm {
  /** Median over the daemons of each one's median RSS over the window. */
  rssMb: number;
  /** Of one core, averaged over the daemons and the window. */
  cpuPercent: number;
}

export interface ConsoleIdleResult {
  pairs: number;
  jobs: number;
  seconds: number;
  enabled: IdleArm;
  disabled: IdleArm;
  /** One clock tick over the window, as a share of a core: CPU time below it cannot be seen. */
  resolutionPercent: number;
  /** Daemons measured without having reduced their heap within IDLE_SETTLE_TIMEOUT_MS: their figures are start-up's. */
  unsettled: number;
}

/** Cron jobs due once a year (1 January), so none fires while measured; the history check below says so. */
async function idleJobs(home: string): Promise<void> {
  await Promise.all(
    Array.from({ length: IDLE_JOBS }, (_, i) =>
      writeFile(
        join(home, "jobs", `job-${String(i).padStart(3, "0")}.yaml`),
        `schedule: "${i % 60} ${i % 24} 1 1 *"\nprompt: Summarise the notes of {{date}}.\ntools: [read_file, list_dir]\n`,
      ),
    ),
  );
}

export async function benchConsoleIdle(): Promise<ConsoleIdleResult> {
  const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
  const homes: Array<{ home: string; enabled: boolean }> = [];
  for (let i = 0; i < IDLE_PAIRS; i++) {
    for (const enabled of [true, false]) {
      const home = await countdHome(enabled ? "on" : "off", enabled ? "" : "console:\n  enabled: false\n");
      await idleJobs(home);
      homes.push({ home, enabled });
    }
  }
  const started: Array<Started & { enabled: boolean }> = [];
  try {
    started.push(
      ...(await Promise.all(
        homes.map(async ({ home, enabled }) => ({ ...(await startCountd(home, IDLE_JOBS, ["--trace-gc"])), enabled })),
      )),
    );
    const settled = (daemon: Started) =>
      daemon.output().includes("Mark-Compact (reduce)") && performance.now() - daemon.lastOutputAt() >= IDLE_QUIET_MS;
    const deadline = performance.now() + IDLE_SETTLE_TIMEOUT_MS;
    while (!started.every(settled) && performance.now() < deadline) await sleep(500);
    const unsettled = started.filter((daemon) => !settled(daemon)).length;
    const pids = started.map((daemon) => daemon.child.pid!);
    const ticks0 = await Promise.all(pids.map(cpuTicks));
    const t0 = performance.now();
    const rss: number[][] = pids.map(() => []);
    while (performance.now() - t0 < IDLE_WINDOW_MS) {
      (await Promise.all(pids.map(rssMb))).forEach((mb, i) => rss[i]!.push(mb));
      await sleep(1000);
    }
    const ticks1 = await Promise.all(pids.map(cpuTicks));
    const seconds = (performance.now() - t0) / 1000;
    for (const daemon of started) {
      const runs = await readdir(join(daemon.home, "state", "runs")).catch(() => []);
      if (runs.length > 0) throw new Error(`bench/console: a job fired while the idle daemons were measured (${daemon.home})`);
    }
    const arm = (enabled: boolean): IdleArm => {
      const of = started.flatMap((daemon, i) => (daemon.enabled === enabled ? [i] : []));
      const ticks = of.reduce((sum, i) => sum + ticks1[i]! - ticks0[i]!, 0) / of.length;
      return { rssMb: median(of.map((i) => median(rss[i]!))), cpuPercent: (ticks / ticksPerSecond / seconds) * 100 };
    };
    const result = {
      pairs: IDLE_PAIRS,
      jobs: IDLE_JOBS,
      seconds,
      enabled: arm(true),
      disabled: arm(false),
      resolutionPercent: (1 / ticksPerSecond / seconds) * 100,
      unsettled,
    };
    await sleep(BEFORE_SIGTERM_MS);
    await Promise.all(started.map(stopCountd));
    return result;
  } finally {
    await Promise.all(started.map((daemon) => stopCountd(daemon).catch(() => {})));
    await Promise.all(homes.map(({ home }) => rm(home, { recursive: true, force: true })));
  }
}

export interface EndpointFigures {
  path: string;
  bytes: number;
  /** The first request after start-up: it reads every job's history file. */
  firstMs?: number;
  requests: number;
  medianMs: number;
}

export type RenderFigures =
  | { rendered: true; ms: number; rows: number; renders: number }
  /** The page did not show a row per job within the time allowed: how many it showed. */
  | { rendered: false; rows: number; timeoutMs: number }
  | { skipped: string };

export interface ConsoleOverviewResult {
  jobs: number;
  runs: number;
  endpoints: EndpointFigures[];
  render: RenderFigures;
}

const TIMEZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"];

/**
 * Cron jobs in several timezones on a day of the month at least nine days away (none fires, and
 * none is caught up, while measured), each with RUNS_PER_JOB runs over the last fortnight in its
 * history file, in the format RunHistory reads.
 */
async function overviewHome(): Promise<string> {
  const home = await countdHome("overview", "");
  const now = Date.now();
  const day = ((new Date(now).getUTCDate() + 9) % 28) + 1;
  const runsDir = join(home, "state", "runs");
  await mkdir(runsDir, { recursive: true });
  const statuses: RunStatus[] = ["ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "error", "skipped"];
  await Promise.all(
    Array.from({ length: OVERVIEW_JOBS }, async (_, i) => {
      const name = `job-${String(i).padStart(4, "0")}`;
      const timezone = TIMEZONES[i % TIMEZONES.length]!;
      await writeFile(
        join(home, "jobs", `${name}.yaml`),
        `description: Bench job ${i}\nschedule: "${i % 60} ${i % 24} ${day} * *"\ntimezone: ${timezone}\nprompt: Summarise the notes of {{date}} and list open questions.\ntools: [read_file, list_dir]\n`,
      );
      const runs = Array.from({ length: RUNS_PER_JOB }, (_, k): RunRecord => {
        const started = new Date(now - ((RUNS_PER_JOB - k) * 14 * DAY_MS) / RUNS_PER_JOB + ((i * 7919) % 3_600_000));
        const status = statuses[(i + k) % statuses.length]!;
        const stamp = started
          .toISOString()
          .replace(/\.\d+Z$/, "Z")
          .replace(/[-:]/g, "");
        return {
          id: `${stamp}-${((i * 31 + k) % 65536).toString(16).padStart(4, "0")}`,
          job: name,
          reason: k % 5 === 4 ? "manual" : "schedule",
          scheduledAt: started.toISOString(),
          startedAt: started.toISOString(),
          ...(status === "skipped" ? {} : { finishedAt: new Date(started.getTime() + 4000 + (i % 50) * 100).toISOString() }),
          status,
          iterations: status === "skipped" ? 0 : 3,
          toolCalls: status === "skipped" ? 0 : 2,
          usage:
            status === "skipped"
              ? { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 }
              : { inputTokens: 2400 + i, outputTokens: 350 + k, cachedInputTokens: 1200, cacheWriteTokens: 0 },
          ...(status === "ok"
            ? {
                resultExcerpt: `Notes of the day for ${name}: three items were closed, two remain open (the supplier's invoice and the release date), and one question needs an answer from the team.`,
              }
            : {}),
          ...(status === "error" ? { error: "LLM request failed: 503 Service Unavailable (after 3 attempts)" } : {}),
          ...(status === "skipped" ? { error: "the previous run was still in progress (overlap: skip)" } : {}),
          sessionId: `cron:${name}:${stamp}`,
        };
      });
      await writeFile(join(runsDir, `${name}.jsonl`), runs.map((run) => `${JSON.stringify(run)}\n`).join(""));
    }),
  );
  return home;
}

async function timed(url: string, token: string): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const body = await response.arrayBuffer();
  const ms = performance.now() - t0;
  if (!response.ok) throw new Error(`bench/console: GET ${url} answered ${response.status}: ${Buffer.from(body).toString()}`);
  return { ms, bytes: body.byteLength };
}

async function render(signIn: string): Promise<RenderFigures> {
  if (!existsSync(CHROMIUM)) return { skipped: `no ${CHROMIUM}: install the Debian package chromium` };
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  try {
    const times: number[] = [];
    let rows = 0;
    for (let i = 0; i < RENDERS; i++) {
      // A fresh context each time: no cookie, no cache, as a browser opening the address countd console prints.
      const context = await browser.newContext();
      const page = await context.newPage();
      const t0 = performance.now();
      await page.goto(signIn);
      const shown = await page
        .waitForFunction(([selector, n]) => document.querySelectorAll(selector).length >= n, [JOB_ROWS, OVERVIEW_JOBS] as const, {
          timeout: RENDER_TIMEOUT_MS,
          polling: "raf",
        })
        .then(
          () => true,
          () => false,
        );
      const ms = performance.now() - t0;
      rows = await page.evaluate((selector) => document.querySelectorAll(selector).length, JOB_ROWS);
      await context.close();
      if (!shown) return { rendered: false, rows, timeoutMs: RENDER_TIMEOUT_MS };
      times.push(ms);
    }
    return { rendered: true, ms: median(times), rows, renders: RENDERS };
  } finally {
    await browser.close();
  }
}

export async function benchConsoleOverview(): Promise<ConsoleOverviewResult> {
  const home = await overviewHome();
  let daemon: Started | undefined;
  try {
    daemon = await startCountd(home, OVERVIEW_JOBS);
    const { url } = JSON.parse(await readFile(join(home, "state", "console.json"), "utf8")) as { url: string };
    const token = (await readFile(join(home, "state", "console.token"), "utf8")).trim();
    // What the overview asks for, and the first page of the run history.
    const paths = ["/api/jobs", "/api/status", "/api/stats?days=14", "/api/runs"];
    const first = await timed(new URL(paths[0]!, url).href, token);
    const samples = new Map(paths.map((path) => [path, [] as Array<{ ms: number; bytes: number }>]));
    for (let i = 0; i < REQUESTS; i++) for (const path of paths) samples.get(path)!.push(await timed(new URL(path, url).href, token));
    const endpoints = paths.map((path, i): EndpointFigures => ({
      path,
      bytes: samples.get(path)!.at(-1)!.bytes,
      ...(i === 0 ? { firstMs: first.ms } : {}),
      requests: REQUESTS,
      medianMs: median(samples.get(path)!.map((s) => s.ms)),
    }));
    const figures = { jobs: OVERVIEW_JOBS, runs: OVERVIEW_JOBS * RUNS_PER_JOB, endpoints, render: await render(`${url}?token=${token}`) };
    await stopCountd(daemon);
    return figures;
  } finally {
    if (daemon) await stopCountd(daemon).catch(() => {});
    await rm(home, { recursive: true, force: true });
  }
}
