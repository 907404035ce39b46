import { mkdir, mkdtemp, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

const ENV = { OPENAI_API_KEY: "sk-jobs-test-key", OPENAI_BASE_URL: "http://127.0.0.1:9/v1" };

/** The row of `name` in the table countd jobs printed. */
const row = (stdout: string, name: string): string => stdout.split("\n").find((line) => line.split(/\s{2,}/)[0] === name) ?? "";

// Each step is a countd process, a daemon started twice among them: slow on a loaded machine.
describe("countd jobs", { timeout: 90_000 }, () => {
  let dir: string;
  let daemon: DaemonProcess | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-jobs-cli-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "timezone: UTC\ntools:\n  exec:\n    enabled: false\n");
  });
  afterEach(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill("SIGTERM");
      await daemon.exited;
    }
    daemon = undefined;
  });
  const countd = (args: string[]) => runCountd(args, { cwd: dir, env: ENV });
  const start = async () => {
    daemon = spawnDaemon(dir, ENV);
    await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), { timeout: 15_000, interval: 100 });
    return daemon;
  };

  it("shows seconds when the schedule has them, and every time in the job's zone with its offset", async () => {
    await writeFile(join(dir, "jobs", "ticker.yaml"), 'prompt: tick\nschedule: "*/10 * * * * *"\n');
    await writeFile(join(dir, "jobs", "berlin.yaml"), 'prompt: report\nschedule: "0 9 * * *"\ntimezone: Europe/Berlin\n');
    const run = await countd(["jobs"]);
    expect(run.code).toBe(0);
    const ticker = row(run.stdout, "ticker").split(/\s{2,}/);
    expect(ticker.slice(0, 3)).toEqual(["ticker", "cron */10 * * * * *", "UTC"]);
    const fires = ticker[3]!.split(", ");
    expect(fires).toHaveLength(3);
    expect(new Set(fires).size).toBe(3);
    for (const fire of fires) expect(fire).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d0 \+00:00$/);
    const berlin = row(run.stdout, "berlin")
      .split(/\s{2,}/)[3]!
      .split(", ");
    // Winter: Berlin is UTC+1 from late October to late March.
    for (const fire of berlin) expect(fire).toMatch(/^\d{4}-\d\d-\d\d 09:00 \+0[12]:00$/);
  });

  it("keeps what it parsed in the state folder, and lists an edited file as it now reads, beside a daemon too", async () => {
    const file = join(dir, "jobs", "report.yaml");
    await writeFile(file, 'prompt: report\nschedule: "0 9 * * *"\n');
    expect(row((await countd(["jobs"])).stdout, "report").split(/\s{2,}/)[1]).toBe("cron 0 9 * * *");
    expect((await stat(join(dir, "state", "job-files.cache"))).size).toBeGreaterThan(0);
    // The same size, so only the text tells the two apart.
    await writeFile(file, 'prompt: report\nschedule: "0 7 * * *"\n');
    expect(row((await countd(["jobs"])).stdout, "report").split(/\s{2,}/)[1]).toBe("cron 0 7 * * *");
    // The daemon's start reads the cache the command wrote, and arms the file as it reads now.
    await writeFile(file, 'prompt: report\nschedule: "0 8 * * *"\n');
    await start();
    expect(row((await countd(["jobs"])).stdout, "report").split(/\s{2,}/)[1]).toBe("cron 0 8 * * *");
    expect(daemon!.output()).not.toContain("job file cache not written");
  });

  it("names a watch job's globs: those in the workspace as written, the others whole", async () => {
    await mkdir(join(dir, "workspace", "inbox"), { recursive: true });
    await writeFile(join(dir, "jobs", "intake.yaml"), `prompt: read them\nwatch:\n  paths: ["inbox/*.csv", "${dir}/*.txt"]\n`);
    const run = await countd(["jobs"]);
    expect(run.code).toBe(0);
    expect(row(run.stdout, "intake").split(/\s{2,}/)[1]).toBe(`watch inbox/*.csv, ${dir}/*.txt`);
  });

  it("lists a job whose file turned invalid with the last good version the daemon fires, marked; not loaded once the daemon is gone", async () => {
    await writeFile(join(dir, "jobs", "weekly.yaml"), 'prompt: weekly\nschedule: "0 9 * * 1"\n');
    await start();
    await writeFile(join(dir, "jobs", "weekly.yaml"), 'prompt: weekly\nschedule: "0 9 * * 1"\ntimeout: soon\n');
    await vi.waitFor(() => expect(daemon!.output()).toContain("keeps running its last good version"), { timeout: 15_000, interval: 100 });

    const running = await countd(["jobs"]);
    expect(running.code).toBe(1);
    const weekly = row(running.stdout, "weekly").split(/\s{2,}/);
    expect(weekly.slice(0, 3)).toEqual(["weekly", "cron 0 9 * * 1", "UTC"]);
    expect(weekly[3]!.split(", ")).toEqual([
      expect.stringMatching(/ 09:00 \+00:00$/),
      expect.stringMatching(/ 09:00 \+00:00$/),
      expect.stringMatching(/ 09:00 \+00:00$/),
    ]);
    expect(weekly.at(-1)).toBe("invalid file (1 problem): its last good version fires");
    expect(running.stderr).toMatch(/^jobs\/weekly\.yaml:3:10: timeout: /m);

    daemon!.child.kill("SIGTERM");
    expect(await daemon!.exited).toBe(0);
    const stopped = await countd(["jobs"]);
    expect(row(stopped.stdout, "weekly").split(/\s{2,}/)).toEqual([
      "weekly",
      "-",
      "-",
      "-",
      "-",
      'not loaded: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
    ]);
  });

  it("lists the heartbeat with its next check-in: the first of the daemon's ticks its rules allow", async () => {
    await writeFile(
      join(dir, "countd.yaml"),
      'timezone: UTC\ntools:\n  exec:\n    enabled: false\nheartbeat:\n  enabled: true\n  every: 1h\n  active_hours: "00:00-00:00"\n  max_per_day: 1\n  deliver:\n    - email: { to: [me@example.com] }\n',
    );
    const notRunning = await countd(["jobs"]);
    expect(
      row(notRunning.stdout, "@heartbeat")
        .split(/\s{2,}/)
        .slice(0, 4),
    ).toEqual(["@heartbeat", "heartbeat every 1h, all day", "UTC", "- (countd is not running)"]);

    await start();
    // The daemon armed @heartbeat like a job: its next tick is the next whole hour.
    const nextTick = () => new Date(Math.ceil((Date.now() + 1) / 3_600_000) * 3_600_000);
    const tick = nextTick();
    const shown = (at: Date) => `${at.toISOString().slice(0, 10)} ${at.toISOString().slice(11, 19)} +00:00`;
    expect(row((await countd(["jobs"])).stdout, "@heartbeat").split(/\s{2,}/)[3]).toBe(shown(tick));

    // Today's one check-in is used up: the next one is the first tick of the next day (UTC).
    daemon!.child.kill("SIGTERM");
    expect(await daemon!.exited).toBe(0);
    const delivered = new Date().toISOString();
    await writeFile(
      join(dir, "state", "state.json"),
      JSON.stringify({ jobs: { "@heartbeat": { checkIns: { delivered: [{ at: delivered, hash: "0".repeat(64) }] } } }, running: {} }),
    );
    await start();
    let expected = nextTick();
    while (expected.toISOString().slice(0, 10) === delivered.slice(0, 10)) expected = new Date(expected.getTime() + 3_600_000);
    expect(row((await countd(["jobs"])).stdout, "@heartbeat").split(/\s{2,}/)[3]).toBe(shown(expected));
  });
});
