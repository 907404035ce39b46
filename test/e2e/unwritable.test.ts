import { spawn, spawnSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { allRuns, ANY_CONSOLE_PORT, BIN, type DaemonProcess, runKey, spawnDaemon } from "../support/daemon-process.js";

/*
 * Scenario 4 of the fault suite: the state or logs directory cannot be written, at start-up or
 * from one moment to the next while jobs fire every second. Tests run as root, which ignores
 * permission bits, so "cannot be written" is a regular file where the folder should be (works
 * for root and on any file system) and, where setpriv can drop to `nobody`, a read-only folder.
 * `COUNTD_FAULTS=full` runs more jobs and more rounds.
 */

const FULL = process.env["COUNTD_FAULTS"] === "full";
const JOBS = FULL ? 10 : 3;
const ROUNDS = FULL ? 5 : 1;
/** Runs each step waits for after the place is usable again. */
const RUNS_PER_STEP = FULL ? 3 * JOBS : JOBS;
const SLOW = { timeout: FULL ? 120_000 : 25_000, interval: 200 };
/** A whole test: several SLOW waits in a row. */
const TEST_TIMEOUT = FULL ? 900_000 : 90_000;
const NOBODY = 65534;

interface LogLine {
  time: number;
  msg: string;
  job?: string;
  runId?: string;
  status?: string;
}

function logLines(output: string): LogLine[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
}

/** Runs the daemon says it finished, by runKey, with the status it logged. */
function finishedInLog(output: string, since = 0): Map<string, string> {
  const finished = new Map<string, string>();
  for (const line of logLines(output))
    if (line.msg === "run finished" && line.time >= since) finished.set(runKey(line.job!, line.runId!), line.status!);
  return finished;
}

function startedInLog(output: string, since: number): string[] {
  return logLines(output)
    .filter((line) => line.msg === "run started" && line.time > since)
    .map((line) => runKey(line.job!, line.runId!));
}

/** setpriv can run the CLI as `nobody` here (it exists, and nobody can read the repository). */
function canRunAsNobody(): boolean {
  const probe = spawnSync("setpriv", [
    `--reuid=${NOBODY}`,
    `--regid=${NOBODY}`,
    "--clear-groups",
    process.execPath,
    "-e",
    `require("fs").accessSync(${JSON.stringify(BIN)})`,
  ]);
  return process.getuid?.() === 0 && probe.status === 0;
}

describe("scenario 4: unwritable state and logs directories", () => {
  const mock = useAimock();
  let dir: string;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-unwritable-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-unwritable-test-key" };
    // Runs take a while, so a folder vanishes or breaks under runs in progress too.
    mock.onMessage("tick", { content: "tock" }, { latency: 300 });
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  });

  function start(extraEnv: Record<string, string> = {}): DaemonProcess {
    const daemon = spawnDaemon(dir, { ...env, ...extraEnv });
    daemons.push(daemon);
    return daemon;
  }

  async function writeTickers(): Promise<void> {
    for (let i = 0; i < JOBS; i++) await writeFile(join(dir, "jobs", `tick-${i}.yaml`), 'schedule: "* * * * * *"\nprompt: tick\n');
  }

  const okRuns = async (since = 0) =>
    (await allRuns(join(dir, "state"))).filter((r) => r.status === "ok" && Date.parse(r.startedAt) > since);

  async function auditLines(): Promise<string[]> {
    const files = (await readdir(join(dir, "logs")).catch(() => [] as string[])).filter((name) => name.startsWith("audit-"));
    const texts = await Promise.all(files.map((name) => readFile(join(dir, "logs", name), "utf8").catch(() => "")));
    return texts.join("").split("\n").filter(Boolean);
  }

  /** What a start that cannot use `place` must do: exit non-zero with one readable line naming it. */
  async function expectRefusedStart(daemon: DaemonProcess, place: string, reason: RegExp): Promise<void> {
    expect(await daemon.exited).not.toBe(0);
    const lines = daemon.output().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(join(dir, place));
    expect(lines[0]).toMatch(reason);
  }

  it.each(["state", "logs"])("refuses to start when a file stands where the %s directory should be", async (place) => {
    await writeFile(join(dir, place), "not a folder\n");
    await expectRefusedStart(start(), place, /^countd: the \w+ directory \S+ is not a directory/);
  });

  it.skipIf(!canRunAsNobody()).each(["state", "logs"])(
    "refuses to start when the %s directory is read-only for its user",
    async (place) => {
      // nobody may enter the test folder and read the job files, but not write in `place`.
      await chmod(dir, 0o755);
      await mkdir(join(dir, place));
      for (const other of ["state", "logs", "workspace"].filter((name) => name !== place)) {
        await mkdir(join(dir, other), { recursive: true });
        await chmod(join(dir, other), 0o777);
      }
      await chmod(join(dir, place), 0o555);
      const daemon = spawnDaemonAsNobody();
      await expectRefusedStart(daemon, place, /^countd: the \w+ directory \S+ is not writable: EACCES/);
    },
  );

  /** `countd start` as `nobody`, as spawnDaemon would start it. */
  function spawnDaemonAsNobody(): DaemonProcess {
    const child = spawn("setpriv", [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath, BIN, "start"], {
      cwd: dir,
      env: { PATH: process.env["PATH"] ?? "", ...ANY_CONSOLE_PORT, ...env },
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    const daemon = { child, output: () => output, exited: new Promise<number | null>((done) => child.on("exit", done)) };
    daemons.push(daemon);
    return daemon;
  }

  it(
    "recreates the state and logs directories removed while jobs fire, and records every run started after",
    async () => {
      await writeTickers();
      const daemon = start();
      let removedAt = 0;
      for (let round = 0; round < ROUNDS; round++) {
        await vi.waitFor(async () => expect((await okRuns()).length).toBeGreaterThanOrEqual(RUNS_PER_STEP), SLOW);
        await rm(join(dir, "state"), { recursive: true, force: true, maxRetries: 5 });
        await rm(join(dir, "logs"), { recursive: true, force: true, maxRetries: 5 });
        const removed = (removedAt = Date.now());
        await vi.waitFor(async () => expect((await okRuns(removed)).length).toBeGreaterThanOrEqual(RUNS_PER_STEP), SLOW);
        // Audit lines resume in the recreated folder.
        await vi.waitFor(async () => expect((await auditLines()).some((line) => line.includes('"kind":"message"'))).toBe(true), SLOW);
        // Every run started after the removal is recorded, as it ended.
        const since = removed;
        await vi.waitFor(async () => {
          const runs = new Map((await allRuns(join(dir, "state"))).map((r) => [runKey(r.job, r.id), r]));
          const finished = finishedInLog(daemon.output(), since);
          for (const id of startedInLog(daemon.output(), since).filter((started) => finished.has(started))) {
            expect(runs.get(id)?.status, `run ${id}`).toBe(finished.get(id));
          }
        }, SLOW);
      }
      // The job state is written again too: each job's last fired slot is later than the removal.
      const { jobs } = JSON.parse(await readFile(join(dir, "state", "state.json"), "utf8")) as {
        jobs: Record<string, { lastScheduledAt: string }>;
      };
      expect(Object.keys(jobs)).toHaveLength(JOBS);
      for (const job of Object.values(jobs)) expect(Date.parse(job.lastScheduledAt)).toBeGreaterThan(removedAt);
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      expect((await allRuns(join(dir, "state"))).filter((r) => r.status === "running")).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    "logs the failure while the state directory cannot be written, and saves the held runs once it can",
    async () => {
      await writeTickers();
      const daemon = start();
      const state = join(dir, "state");
      for (let round = 0; round < ROUNDS; round++) {
        // The earlier rounds' runs, their outages' among them, and this round's own: so the runs
        // counted at the end are at least what the rounds waited for, however fast they fired.
        await vi.waitFor(async () => expect((await okRuns()).length).toBeGreaterThanOrEqual(RUNS_PER_STEP * (2 * round + 1)), SLOW);
        // The folder moves aside and a file takes its place: no write under state/ can succeed.
        await rename(state, `${state}.aside`);
        await writeFile(state, "not a folder\n");
        const broken = Date.now();
        await vi.waitFor(() => expect(finishedInLog(daemon.output(), broken).size).toBeGreaterThanOrEqual(RUNS_PER_STEP), SLOW);
        expect(logLines(daemon.output())).toContainEqual(
          expect.objectContaining({
            msg: "could not save a run record; kept, saved again later",
            runId: expect.any(String),
            error: expect.any(String),
          }),
        );
        await rm(state);
        await rename(`${state}.aside`, state);
        await vi.waitFor(() => expect(daemon.output().split("could not be saved before").length).toBeGreaterThan(round + 1), SLOW);
      }
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      // Every run the daemon finished, before, during and after the outages, is on disk as it ended.
      const runs = new Map<string, RunRecord>((await allRuns(state)).map((r) => [runKey(r.job, r.id), r]));
      const finished = finishedInLog(daemon.output());
      expect(finished.size).toBeGreaterThanOrEqual(RUNS_PER_STEP * 2 * ROUNDS);
      for (const [id, status] of finished) expect(runs.get(id)?.status, `run ${id}`).toBe(status);
      expect([...runs.values()].filter((r) => r.status === "running")).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    "reports lost audit lines while the logs directory cannot be written, and keeps running and recording runs",
    async () => {
      await writeTickers();
      const daemon = start();
      await vi.waitFor(async () => expect((await okRuns()).length).toBeGreaterThanOrEqual(RUNS_PER_STEP), SLOW);
      await rm(join(dir, "logs"), { recursive: true, force: true, maxRetries: 5 });
      await writeFile(join(dir, "logs"), "not a folder\n");
      const broken = Date.now();
      await vi.waitFor(() => expect(daemon.output()).toMatch(/countd: audit log write in \S+logs failed: /), SLOW);
      await vi.waitFor(async () => expect((await okRuns(broken)).length).toBeGreaterThanOrEqual(RUNS_PER_STEP), SLOW);
      await rm(join(dir, "logs"));
      const repaired = Date.now();
      await vi.waitFor(async () => {
        const times = (await auditLines()).map((line) => Date.parse((JSON.parse(line) as { time: string }).time));
        expect(times.some((time) => time > repaired)).toBe(true);
      }, SLOW);
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
    },
    TEST_TIMEOUT,
  );
});
