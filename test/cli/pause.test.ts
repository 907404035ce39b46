import { appendFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";

/** Fires every second, so a paused slot is seen within moments. */
const TICK = { tick: "prompt: tick\nschedule: '* * * * * *'\n" };

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd pause and resume", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  async function setup() {
    mock.onMessage("tick", { content: "tock" });
    const dir = await countdFolder(TICK);
    const env = llmEnv(`${mock.url}/v1`);
    return { dir, env, countd: countdIn(dir, env) };
  }

  const runsSince = async (countd: ReturnType<typeof countdIn>, since: number) =>
    (JSON.parse((await countd(["history", "tick", "--json", "-n", "1000"])).stdout) as RunRecord[]).filter(
      (run) => Date.parse(run.scheduledAt) >= since,
    );

  it("a pause survives a restart: shown by status and jobs, the job's slots recorded skipped (paused) until resumed", async () => {
    const { dir, env, countd } = await setup();
    daemon = await startDaemon(dir, env);
    const paused = await countd(["pause", "tick"]);
    expect(paused).toMatchObject({ code: 0, stdout: 'paused tick: fires are recorded skipped ("paused") until countd resume tick\n' });

    expect(await stopDaemon(daemon)).toBe(0);
    daemon = await startDaemon(dir, env);
    const restarted = Date.now();
    expect((await countd(["status"])).stdout).toContain("\nloaded:  1 job, 0 invalid, 1 paused\n");
    expect((await countd(["jobs"])).stdout).toMatch(/^tick \(paused\) +cron \* \* \* \* \* \*/m);

    await vi.waitFor(async () => expect((await runsSince(countd, restarted)).filter((run) => run.reason === "schedule")).not.toEqual([]), {
      timeout: 15_000,
      interval: 300,
    });
    for (const run of await runsSince(countd, restarted)) expect(run).toMatchObject({ status: "skipped", error: "paused" });
    const requests = mock.getRequests().length;

    expect(await countd(["resume", "tick"])).toMatchObject({ code: 0, stdout: "resumed tick\n" });
    const resumed = Date.now();
    await vi.waitFor(async () => expect((await runsSince(countd, resumed)).map((run) => run.status)).toContain("ok"), {
      timeout: 15_000,
      interval: 300,
    });
    expect(mock.getRequests().length).toBeGreaterThan(requests);
    expect((await countd(["status"])).stdout).toContain("\nloaded:  1 job, 0 invalid, 0 paused\n");
  });

  it("pause --all is the kill switch: a job resumed alone stays paused until resume --all", async () => {
    const { dir, env, countd } = await setup();
    daemon = await startDaemon(dir, env);
    expect(await countd(["pause", "--all"])).toMatchObject({
      code: 0,
      stdout: 'paused every job: fires are recorded skipped ("paused") until countd resume --all\n',
    });
    const pausedAt = Date.now();
    expect(await countd(["resume", "tick"])).toMatchObject({
      code: 0,
      stdout: "tick stays paused: every job is paused (countd resume --all)\n",
    });
    await vi.waitFor(async () => expect(await runsSince(countd, pausedAt + 1_000)).not.toEqual([]), { timeout: 15_000, interval: 300 });
    for (const run of await runsSince(countd, pausedAt + 1_000)) expect(run).toMatchObject({ status: "skipped", error: "paused" });

    expect(await countd(["resume", "--all"])).toMatchObject({ code: 0, stdout: "resumed every job\n" });
    const resumed = Date.now();
    await vi.waitFor(async () => expect((await runsSince(countd, resumed)).map((run) => run.status)).toContain("ok"), {
      timeout: 15_000,
      interval: 300,
    });
  });

  it("without a daemon the pause is kept in state.json and holds from the daemon's first fire", async () => {
    const { dir, env, countd } = await setup();
    const paused = await countd(["pause", "tick"]);
    expect(paused).toMatchObject({
      code: 0,
      stdout:
        'paused tick: fires are recorded skipped ("paused") until countd resume tick (countd is not running: kept in state.json for its next start)\n',
    });
    daemon = await startDaemon(dir, env);
    const started = Date.now();
    await vi.waitFor(async () => expect(await runsSince(countd, started)).not.toEqual([]), { timeout: 15_000, interval: 300 });
    for (const run of await runsSince(countd, started)) expect(run).toMatchObject({ status: "skipped", error: "paused" });
    expect(mock.getRequests()).toEqual([]);
  });

  it("pauses @heartbeat as any job without a daemon, its check-ins kept beside the pause in its job state", async () => {
    const { dir, countd } = await setup();
    await appendFile(
      join(dir, "countd.yaml"),
      "heartbeat:\n  enabled: true\n  every: 1h\n  deliver:\n    - email: { to: [me@example.com] }\n",
    );
    const stateFile = join(dir, "state", "state.json");
    const checkIns = { delivered: [{ at: new Date().toISOString(), hash: "0".repeat(64) }] };
    await mkdir(join(dir, "state"), { recursive: true });
    await writeFile(stateFile, JSON.stringify({ jobs: { "@heartbeat": { checkIns } }, running: {} }));
    const onDisk = async () => JSON.parse(await readFile(stateFile, "utf8")) as unknown;

    expect(await countd(["pause", "@heartbeat"])).toMatchObject({
      code: 0,
      stdout:
        'paused @heartbeat: fires are recorded skipped ("paused") until countd resume @heartbeat (countd is not running: kept in state.json for its next start)\n',
    });
    expect(await onDisk()).toEqual({ jobs: { "@heartbeat": { checkIns, pausedAt: expect.any(String) } }, running: {} });
    expect((await countd(["jobs"])).stdout).toMatch(/^@heartbeat \(paused\) +heartbeat every 1h/m);

    expect(await countd(["resume", "@heartbeat"])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^resumed @heartbeat /) });
    expect(await onDisk()).toEqual({ jobs: { "@heartbeat": { checkIns } }, running: {} });
  });

  it("names an unknown job, with or without a daemon, and wants a job or --all", async () => {
    const { dir, env, countd } = await setup();
    const offline = await countd(["pause", "nope"]);
    expect(offline).toMatchObject({ code: 1, stderr: expect.stringContaining('countd: no job named "nope"') });
    daemon = await startDaemon(dir, env);
    const online = await countd(["resume", "nope"]);
    expect(online).toMatchObject({ code: 1, stderr: expect.stringContaining('countd: no job named "nope"') });
    for (const args of [["pause"], ["resume", "tick", "--all"]]) {
      const wrong = await countd(args);
      expect(wrong.code, args.join(" ")).toBe(2);
      expect(wrong.stderr).toContain("name a job, or --all for every job");
    }
  });
});
