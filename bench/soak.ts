/**
 * Soak: the built daemon (`node bin/countd.js start`) with 50 jobs firing every second against an
 * aimock server on loopback (a short answer, no tools), for `minutes` (COUNTD_SOAK_MINUTES,
 * default 10). RSS is read from /proc every second; the figures are medians of the 10 s before
 * each point, so one GC does not decide them. Growth after warm-up is the end minus the end of the
 * first minute: what a daemon that runs for weeks would keep adding. Fire lateness is each run
 * record's startedAt − scheduledAt, over the records the state keeps (the newest 200 per job).
 * The runner may start all 50 at once (concurrency 50), so lateness measures the daemon, not a
 * queue the configuration asked for.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { LLMock } from "@copilotkit/aimock";
import { StateStore } from "../src/store/state.js";
import { median, percentile } from "./stats.js";

const BIN = fileURLToPath(new URL("../bin/countd.js", import.meta.url));
const JOBS = 50;
const WARM_UP_MS = 60_000;
/** The span whose RSS samples are summed up into one figure. */
const WINDOW_MS = 10_000;
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;
/** Enough of the daemon's output to explain a failure. */
const OUTPUT_KEPT_CHARS = 20_000;

export interface SoakResult {
  rssStartMb: number;
  rssMiddleMb: number;
  rssEndMb: number;
  /** RSS at the end minus RSS at the end of the warm-up. Target: under 10 MB. */
  growthAfterWarmupMb: number;
  latenessP50Ms: number;
  latenessP99Ms: number;
}

interface Sample {
  atMs: number;
  rssMb: number;
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) / 1024;
}

/** The median RSS of the samples in the WINDOW_MS up to `atMs` (the first sample if none). */
function rssAt(samples: Sample[], atMs: number): number {
  const inWindow = samples.filter((s) => s.atMs <= atMs && s.atMs > atMs - WINDOW_MS).map((s) => s.rssMb);
  return inWindow.length > 0 ? median(inWindow) : samples[0]!.rssMb;
}

async function countdHome(): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), "countd-bench-soak-"));
  await writeFile(
    join(home, "countd.yaml"),
    "timezone: UTC\nrunner:\n  concurrency: 50\n  shutdown_grace: 5s\ntools:\n  exec:\n    sandbox: none\n",
  );
  await mkdir(join(home, "jobs"));
  for (let i = 0; i < JOBS; i++) {
    const name = `soak-${String(i).padStart(2, "0")}.yaml`;
    await writeFile(join(home, "jobs", name), 'schedule: "* * * * * *"\nprompt: soak check\ntools: []\noverlap: skip\n');
  }
  return home;
}

/** Resolves once the daemon logged "countd started"; its output is kept short, as it logs every run. */
async function startCountd(home: string, baseURL: string): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [BIN, "start"], {
    cwd: home,
    env: {
      PATH: process.env["PATH"] ?? "",
      OPENAI_API_KEY: "sk-soak",
      OPENAI_BASE_URL: baseURL,
      COUNTD_LOG_LEVEL: "info",
      COUNTD_CONSOLE_LISTEN: "127.0.0.1:0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let started = false;
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT_CHARS);
  };
  child.stderr!.on("data", keep);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`countd did not start within ${START_TIMEOUT_MS / 1000} s:\n${output}`)),
      START_TIMEOUT_MS,
    );
    child.stdout!.on("data", (chunk: Buffer) => {
      keep(chunk);
      if (started || !output.includes('"countd started"')) return;
      started = true;
      clearTimeout(timer);
      resolve();
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`countd exited (${signal ?? `code ${code}`}):\n${output}`));
    });
  }).catch((err: unknown) => {
    child.kill("SIGKILL");
    throw err;
  });
  return { child, output: () => output };
}

async function stopCountd(child: ChildProcess, output: () => string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) throw new Error(`countd exited during the soak:\n${output()}`);
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  const [code, signal] = await exited;
  clearTimeout(timer);
  if (code !== 0) throw new Error(`countd exited with ${signal ?? `code ${code}`} on SIGTERM:\n${output()}`);
}

export async function benchSoak(minutes = Number(process.env["COUNTD_SOAK_MINUTES"] ?? 10)): Promise<SoakResult> {
  const durationMs = minutes * 60_000;
  if (!(durationMs > WARM_UP_MS)) throw new Error(`bench/soak: COUNTD_SOAK_MINUTES must be more than 1 (the warm-up), not ${minutes}`);
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  mock.onMessage("soak check", { content: "All quiet." });
  await mock.start();
  const home = await countdHome();
  try {
    const { child, output } = await startCountd(home, `${mock.url}/v1`);
    try {
      const t0 = Date.now();
      const samples: Sample[] = [];
      while (Date.now() - t0 < durationMs) {
        if (child.exitCode !== null) throw new Error(`countd exited during the soak:\n${output()}`);
        samples.push({ atMs: Date.now() - t0, rssMb: await rssMb(child.pid!) });
        await sleep(1_000);
      }
      const rssEndMb = rssAt(samples, durationMs);
      const warmRss = rssAt(samples, WARM_UP_MS);
      await stopCountd(child, output);
      const runs = await (await StateStore.open(join(home, "state"))).allRuns();
      const scheduled = runs.filter((r) => r.reason === "schedule" && r.status === "ok");
      if (scheduled.length === 0) throw new Error(`bench/soak: no run finished ok:\n${output()}`);
      const lateness = scheduled.map((r) => Date.parse(r.startedAt) - Date.parse(r.scheduledAt)).sort((a, b) => a - b);
      return {
        rssStartMb: samples[0]!.rssMb,
        rssMiddleMb: rssAt(samples, durationMs / 2),
        rssEndMb,
        growthAfterWarmupMb: rssEndMb - warmRss,
        latenessP50Ms: percentile(lateness, 0.5),
        latenessP99Ms: percentile(lateness, 0.99),
      };
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  } finally {
    await mock.stop();
    await rm(home, { recursive: true, force: true });
  }
}
