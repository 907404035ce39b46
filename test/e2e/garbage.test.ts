import { readFile, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { mutateJob, seededRandom, type MutatedFile } from "../support/mutate.js";

const FULL = process.env["COUNTD_FAULTS"] === "full";
const FILES = FULL ? 1_000 : 100;
const BATCH = FULL ? 50 : 10;
/** Set COUNTD_GARBAGE_SEED to make the files of a failed run again. */
const SEED = Number(process.env["COUNTD_GARBAGE_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const MAX_RSS_BYTES = 300 * 1024 * 1024;
/** The valid jobs fire every second; a longer silence means the storm starved the scheduler. */
const MAX_GAP_MS = 5_000;
const VALID_JOBS = ["a-steady-1", "a-steady-2"];

interface LogLine {
  level: number;
  msg: string;
  /** The job registry's: a problem it found in a job file, and the jobs a change of the list added. */
  problem?: string;
  added?: string[];
}

describe("garbage in: mutated job files written while the daemon runs", () => {
  const mock = useAimock();
  const daemons: DaemonProcess[] = [];
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
  });

  it(
    `reports every bad file at its position, stays under 300 MB and keeps the valid jobs firing (${FILES} files)`,
    { timeout: FULL ? 600_000 : 90_000 },
    async () => {
      console.log(`garbage: seed ${SEED} (COUNTD_GARBAGE_SEED=${SEED} makes the same files)`);
      const dir = await mkdtemp(join(tmpdir(), "countd-garbage-"));
      await mkdir(join(dir, "jobs"));
      await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
      mock.onMessage("steady tick", { content: "tock" });
      for (const name of VALID_JOBS) await writeFile(join(dir, "jobs", `${name}.yaml`), 'schedule: "* * * * * *"\nprompt: steady tick\n');

      const daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-garbage-test-key" });
      daemons.push(daemon);
      const pid = daemon.child.pid!;
      let peakRss = 0;
      const sampler = setInterval(() => {
        void readRss(pid).then((rss) => (peakRss = Math.max(peakRss, rss)));
      }, 100);
      try {
        const okRuns = async (job: string) => (await allRuns(join(dir, "state"))).filter((run) => run.job === job && run.status === "ok");
        for (const job of VALID_JOBS)
          await vi.waitFor(async () => expect((await okRuns(job)).length).toBeGreaterThan(0), { timeout: 15_000, interval: 200 });

        const random = seededRandom(SEED);
        const files = new Map<string, MutatedFile>();
        const stormStart = Date.now();
        for (let first = 0; first < FILES; first += BATCH) {
          const batch = Array.from(
            { length: Math.min(BATCH, FILES - first) },
            (_, i) => [`m-${String(first + i).padStart(4, "0")}`, mutateJob(random)] as const,
          );
          await Promise.all(batch.map(([name, file]) => writeFile(join(dir, "jobs", `${name}.yaml`), file.content)));
          for (const [name, file] of batch) files.set(name, file);
          // Spread over time, so the storm overlaps many fires of the valid jobs.
          await sleep(250);
        }

        // A file is accounted for once an error line places a problem in it, or it loaded as a job.
        const unaccounted = () => {
          const log = logLines(daemon.output());
          const reported = new Set<string>();
          const loaded = new Set<string>();
          for (const { level, problem, added } of log) {
            for (const match of (problem ?? "").matchAll(/jobs\/(m-\d{4})\.yaml:\d+:\d+: /g)) if (level >= 50) reported.add(match[1]!);
            for (const name of added ?? []) loaded.add(name);
          }
          return { reported, loaded, missing: [...files.keys()].filter((name) => !reported.has(name) && !loaded.has(name)) };
        };
        await vi.waitFor(
          () => {
            const { missing } = unaccounted();
            expect(
              missing.map((name) => `${name} (${files.get(name)!.kind}: ${files.get(name)!.detail})`),
              `seed ${SEED}`,
            ).toEqual([]);
          },
          { timeout: 60_000, interval: 500 },
        );
        const stormEnd = Date.now();

        // Runs go on after the storm too.
        for (const job of VALID_JOBS) {
          await vi.waitFor(
            async () => expect((await okRuns(job)).filter((run) => Date.parse(run.startedAt) > stormEnd).length).toBeGreaterThanOrEqual(2),
            {
              timeout: 15_000,
              interval: 200,
            },
          );
        }
        expect(daemon.child.exitCode, "the daemon exited during the storm").toBeNull();
        daemon.child.kill("SIGTERM");
        expect(await daemon.exited).toBe(0);

        const { reported, loaded } = unaccounted();
        const problemLines = logLines(daemon.output()).filter(
          ({ level, problem }) => level >= 50 && /jobs\/m-\d{4}\.yaml:\d+:\d+: /.test(problem ?? ""),
        ).length;
        let maxGap = 0;
        for (const job of VALID_JOBS) {
          const starts = (await okRuns(job)).map((run) => Date.parse(run.startedAt)).sort((a, b) => a - b);
          expect(starts.filter((start) => start > stormStart && start < stormEnd).length, `${job} ran during the storm`).toBeGreaterThan(0);
          for (let i = 1; i < starts.length; i++) maxGap = Math.max(maxGap, starts[i]! - starts[i - 1]!);
        }
        console.log(
          `garbage: seed ${SEED}: ${files.size} files in ${Math.round((stormEnd - stormStart) / 1000)} s, ${reported.size} reported ` +
            `(${problemLines} problem lines), ${loaded.size} still valid; peak RSS ${(peakRss / 2 ** 20).toFixed(1)} MB; ` +
            `longest gap between runs of a valid job ${maxGap} ms`,
        );
        expect(peakRss, `seed ${SEED}: peak RSS`).toBeLessThan(MAX_RSS_BYTES);
        expect(maxGap, `seed ${SEED}: longest gap between two runs of a valid job`).toBeLessThan(MAX_GAP_MS);
      } finally {
        clearInterval(sampler);
      }
    },
  );
});

/** VmRSS from /proc, in bytes; 0 once the process is gone. */
async function readRss(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

function logLines(output: string): LogLine[] {
  return output.split("\n").flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as Partial<LogLine>;
      if (typeof parsed.level !== "number" || typeof parsed.msg !== "string") return [];
      return [{ level: parsed.level, msg: parsed.msg, problem: parsed.problem, added: parsed.added }];
    } catch {
      return [];
    }
  });
}
