/**
 * The built daemon (`node bin/countd.js start`) as a user runs it, in a temp dir holding
 * countd.yaml and 1,000 or 10,000 job files of which none is due while it is measured; the LLM endpoint is
 * an aimock server on loopback, which idle jobs never call (checked in its request journal).
 * (a) Start-up: from spawn to the "countd started" log line, beside the same daemon with no job
 *     files, the two interleaved start by start so machine noise hits both; a start without the
 *     job file cache, which parses every file as the first start in a folder does, apart.
 * (b) Idle: RSS, CPU time and inotify watches from /proc over a minute, once start-up has settled.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { LLMock } from "@copilotkit/aimock";
import { JOB_FILE_CACHE } from "../src/jobs/file-cache.js";
import { bareEnv, libraryProbe, timeNode } from "./bare.js";
import { median } from "./stats.js";

const BIN = fileURLToPath(new URL("../bin/countd.js", import.meta.url));
const STARTS = 3;
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
/**
 * countd logs "countd started" before it installs its SIGTERM handler (src/cli/start.ts), so a
 * SIGTERM sent the moment the line is read can meet the default action and kill it uncleanly.
 */
const BEFORE_SIGTERM_MS = 250;
/** Timers, the job watcher and lazy compilation finish their first work before CPU time is counted. */
const SETTLE_MS = 5_000;
/** Slots this close ahead of now are left out of the schedules, so no job fires during a bench. */
const QUIET_MS = 30 * 60_000;
const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;
/** Intervals in hours prime to 24, so their epoch-anchored slots do not all meet at midnight. */
const EVERY_HOURS = [5, 7, 11, 13, 17, 19, 23];

const daemons = new Set<ChildProcess>();
// A bench that throws half-way must not leave a daemon running behind it.
process.on("exit", () => {
  for (const child of daemons) child.kill("SIGKILL");
});

/** One job file per index: cron `m h * * *` spread over the day, every tenth an `every` job. */
function jobFiles(count: number, now: number): string[] {
  const quietEnd = now + QUIET_MS;
  const startOfDay = Math.floor(now / DAY_MS) * DAY_MS;
  const nextAt = (minuteOfDay: number) => {
    const today = startOfDay + minuteOfDay * MINUTE_MS;
    return today > now ? today : today + DAY_MS;
  };
  const minutes = Array.from({ length: 24 * 60 }, (_, m) => m).filter((m) => nextAt(m) > quietEnd);
  const everyHours = EVERY_HOURS.filter((hours) => {
    const interval = hours * 60 * MINUTE_MS;
    return (Math.floor(now / interval) + 1) * interval > quietEnd;
  });
  const cronCount = count - Math.floor(count / 10);
  const files: string[] = [];
  let crons = 0;
  for (let i = 0; i < count; i++) {
    let trigger: string;
    if (i % 10 === 9) {
      trigger = `every: ${everyHours[i % everyHours.length]}h`;
    } else {
      const minute = minutes[Math.floor((crons++ * minutes.length) / cronCount)]!;
      trigger = `schedule: "${minute % 60} ${Math.floor(minute / 60)} * * *"`;
    }
    files.push(
      [
        `description: Bench job ${i}`,
        trigger,
        "prompt: |",
        "  Summarise the notes written on {{date}} and list open questions.",
        "tools: [read_file, list_dir]",
        "timeout: 5m",
        "",
      ].join("\n"),
    );
  }
  return files;
}

/** A folder countd runs in: countd.yaml, and `jobs` job files in jobs/. */
async function countdHome(jobs: number): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), "countd-bench-daemon-"));
  // No bwrap probe at start-up: it is the sandbox's cost, not the daemon's, and logs a warning.
  await writeFile(join(home, "countd.yaml"), "timezone: UTC\ntools:\n  exec:\n    sandbox: none\n");
  await mkdir(join(home, "jobs"));
  const files = jobFiles(jobs, Date.now());
  await Promise.all(files.map((text, i) => writeFile(join(home, "jobs", `job-${String(i).padStart(4, "0")}.yaml`), text)));
  return home;
}

export interface Started {
  child: ChildProcess;
  startupMs: number;
  /** What it logged so far, for the error when it misbehaves. */
  output: () => string;
  /** performance.now() of its last output. */
  lastOutputAt: () => number;
}

type Start = (home: string, jobs: number, nodeArgs?: string[]) => Promise<Started>;

/**
 * Runs `task` with an aimock server on loopback and a `start` that spawns the daemon against it;
 * every daemon `task` started is stopped at the end, also when it throws. The mock's request
 * journal must stay empty: an LLM request means a job fired, and the daemon was not idle.
 */
async function withCountd<T>(task: (start: Start) => Promise<T>): Promise<T> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  const started: Started[] = [];
  try {
    const result = await task(async (home, jobs, nodeArgs) => {
      const daemon = await startCountd(home, jobs, `${mock.url}/v1`, nodeArgs);
      started.push(daemon);
      return daemon;
    });
    const requests = mock.getRequests().length;
    if (requests > 0) throw new Error(`bench/daemon: ${requests} LLM requests reached the mock; a job fired while it was measured`);
    return result;
  } finally {
    // Already stopped unless `task` threw; then its error is the one worth reporting.
    await Promise.all(started.map((daemon) => stopCountd(daemon).catch(() => {})));
    await mock.stop();
  }
}

/** Spawns the daemon in `home`; resolves when it logs "countd started" having loaded all `jobs`. */
export async function startCountd(home: string, jobs: number, baseURL: string, nodeArgs: string[] = []): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, BIN, "start"], {
    cwd: home,
    env: {
      ...bareEnv(),
      OPENAI_API_KEY: "sk-unused",
      OPENAI_BASE_URL: baseURL,
      COUNTD_LOG_LEVEL: "info",
      COUNTD_CONSOLE_LISTEN: "127.0.0.1:0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  daemons.add(child);
  child.once("exit", () => daemons.delete(child));
  let output = "";
  let lastOutputAt = performance.now();
  child.stdout!.on("data", () => (lastOutputAt = performance.now()));
  child.stderr!.on("data", () => (lastOutputAt = performance.now()));
  const startupMs = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`countd did not log "countd started" within ${START_TIMEOUT_MS / 1000} s:\n${output}`)),
      START_TIMEOUT_MS,
    );
    child.stdout!.on("data", (chunk: Buffer) => {
      const at = performance.now();
      output += chunk.toString();
      const line = output
        .split("\n")
        .slice(0, -1)
        .find((l) => l.includes('"countd started"'));
      if (!line) return;
      clearTimeout(timer);
      const loaded = (JSON.parse(line) as { jobs?: number }).jobs;
      if (loaded === jobs) resolve(at - t0);
      else reject(new Error(`countd started with ${loaded} jobs, not the ${jobs} written:\n${output}`));
    });
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`countd exited (${signal ?? `code ${code}`}) before it started:\n${output}`));
    });
  }).catch(async (err: unknown) => {
    await stopCountd({ child, output: () => output }).catch(() => {});
    throw err;
  });
  return { child, startupMs, output: () => output, lastOutputAt: () => lastOutputAt };
}

/** SIGTERM, as systemd stops it; a daemon that does not exit cleanly in time is killed and reported. */
export async function stopCountd({ child, output }: Pick<Started, "child" | "output">): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(resolve, STOP_TIMEOUT_MS, "timeout")));
  const result = await Promise.race([exited, timeout]);
  clearTimeout(timer);
  if (result === "timeout") {
    child.kill("SIGKILL");
    await exited;
    throw new Error(
      `countd (pid ${child.pid}) did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM; killed. It logged:\n${output()}`,
    );
  }
  const [code, signal] = result;
  if (code !== 0) throw new Error(`countd (pid ${child.pid}) exited with ${signal ?? `code ${code}`} on SIGTERM. It logged:\n${output()}`);
}

export interface StartupResult {
  jobs: number;
  /**
   * Median spawn to "countd started" with `jobs` job files, none changed since the last start
   * (a restart: what the files gave is read from the state folder's job file cache).
   */
  startupMs: number;
  /** Median start with no job file cache, every file parsed: the first in a folder, or after an upgrade. */
  firstStartupMs: number;
  /** The same with no job files, measured in the same rounds: the daemon's fixed cost. */
  emptyStartupMs: number;
  /** Spawn to exit of a bare `node -e 0`, measured in the same rounds. */
  bareNodeMs: number;
  /** Spawn to exit of bench/bare.ts's library probe, measured in the same rounds. */
  libraryFloorMs: number;
}

export async function benchStartup(jobs = 1000): Promise<StartupResult> {
  const [full, empty, probe] = await Promise.all([countdHome(jobs), countdHome(0), libraryProbe()]);
  try {
    return await withCountd(async (start) => {
      const fullMs: number[] = [];
      const emptyMs: number[] = [];
      const bareMs: number[] = [];
      const floorMs: number[] = [];
      const measure = async (home: string, count: number, into: number[]) => {
        const started = await start(home, count);
        into.push(started.startupMs);
        await sleep(BEFORE_SIGTERM_MS);
        await stopCountd(started);
      };
      const first: number[] = [];
      // Without its cache, a start parses every file, as the first one in a folder does.
      const uncached = async () => {
        await rm(join(full, "state", JOB_FILE_CACHE), { force: true });
        await measure(full, jobs, first);
      };
      for (let round = 0; round < STARTS; round++) {
        bareMs.push((await timeNode(["-e", "0"])).ms);
        floorMs.push((await timeNode([probe.file])).ms);
        // Alternating which goes first, so none always starts on a warmer machine.
        if (round % 2 === 0) {
          await measure(empty, 0, emptyMs);
          await uncached();
          await measure(full, jobs, fullMs);
        } else {
          await uncached();
          await measure(full, jobs, fullMs);
          await measure(empty, 0, emptyMs);
        }
      }
      return {
        jobs,
        startupMs: median(fullMs),
        firstStartupMs: median(first),
        emptyStartupMs: median(emptyMs),
        bareNodeMs: median(bareMs),
        libraryFloorMs: median(floorMs),
      };
    });
  } finally {
    await Promise.all([...[full, empty].map((home) => rm(home, { recursive: true, force: true })), probe.remove()]);
  }
}

/** utime + stime of `pid`, in clock ticks (proc(5): fields 14 and 15; the name in field 2 may hold spaces). */
async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

/** VmRSS (now) and VmHWM (the peak so far) of `pid`, in MB. */
async function memoryMb(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => {
    const kb = new RegExp(`^${name}:\\s+(\\d+) kB$`, "m").exec(status);
    if (!kb) throw new Error(`no ${name} in /proc/${pid}/status`);
    return Number(kb[1]) / 1024;
  };
  return { rss: field("VmRSS"), peak: field("VmHWM") };
}

/** The inotify watches `pid` holds, as the kernel counts them against fs.inotify.max_user_watches. */
async function inotifyWatches(pid: number): Promise<number> {
  let watches = 0;
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
    if (target !== "anon_inode:inotify") continue;
    const info = await readFile(`/proc/${pid}/fdinfo/${fd}`, "utf8").catch(() => "");
    watches += info.split("\n").filter((line) => line.startsWith("inotify wd:")).length;
  }
  return watches;
}

export interface IdleResult {
  jobs: number;
  /** The daemon's inotify watches: with no watch jobs, those on the jobs folder. */
  inotifyWatches: number;
  /** At the end of the window. */
  rssMb: number;
  /** The highest RSS since the daemon started, start-up included. */
  peakRssMb: number;
  /** Of one core, averaged over the window. */
  cpuPercent: number;
  seconds: number;
  /**
   * Before the window: from SETTLE_MS after "countd started" until V8 had given back the heap
   * start-up grew, how long it took and the CPU time it used.
   */
  giveBack: { seconds: number; cpuMs: number; settled: boolean };
}

/**
 * V8's memory reducer gives back the heap start-up grew (40 MB and more with 10,000 jobs) with one
 * to three full collections, 100-300 ms of CPU, at a moment of its own: 49 to 122 s after start in
 * six runs. A window that opens at a fixed time took them in some runs and not in others (0.5 %
 * against under 0.1 % of a core), so the window opens once the daemon, run with --trace-gc, has
 * printed a "Mark-Compact (reduce)" and then nothing for GIVE_BACK_QUIET_MS; what those
 * collections cost is printed beside the idle figure, so nothing is left out. An hour after
 * start, top sees the window's figure.
 */
const GIVE_BACK_QUIET_MS = 5_000;
const GIVE_BACK_TIMEOUT_MS = 180_000;

/** `COUNTD_BENCH_IDLE_SECONDS` shortens the window for a quick check. */
export async function benchIdle(jobs = 1000, seconds = Number(process.env["COUNTD_BENCH_IDLE_SECONDS"] ?? 60)): Promise<IdleResult> {
  if (!(seconds > 0))
    throw new Error(
      `COUNTD_BENCH_IDLE_SECONDS must be a positive number of seconds, got ${JSON.stringify(process.env["COUNTD_BENCH_IDLE_SECONDS"])}`,
    );
  const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
  const home = await countdHome(jobs);
  try {
    return await withCountd(async (start) => {
      const started = await start(home, jobs, ["--trace-gc"]);
      const pid = started.child.pid!;
      await sleep(SETTLE_MS);
      const settleTicks = await cpuTicks(pid);
      const settleAt = performance.now();
      const gaveBack = () =>
        started.output().includes("Mark-Compact (reduce)") && performance.now() - started.lastOutputAt() >= GIVE_BACK_QUIET_MS;
      while (!gaveBack() && performance.now() - settleAt < GIVE_BACK_TIMEOUT_MS) await sleep(500);
      const settled = gaveBack();
      const ticks0 = await cpuTicks(pid);
      const t0 = performance.now();
      await sleep(seconds * 1000);
      const ticks1 = await cpuTicks(pid);
      const elapsedS = (performance.now() - t0) / 1000;
      const memory = await memoryMb(pid);
      const watches = await inotifyWatches(pid);
      await stopCountd(started);
      return {
        jobs,
        inotifyWatches: watches,
        rssMb: memory.rss,
        peakRssMb: memory.peak,
        cpuPercent: ((ticks1 - ticks0) / ticksPerSecond / elapsedS) * 100,
        seconds: elapsedS,
        giveBack: {
          seconds: (t0 - settleAt) / 1000,
          cpuMs: ((ticks0 - settleTicks) / ticksPerSecond) * 1000,
          settled,
        },
      };
    });
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}
