import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job, Schedule } from "../../src/jobs/types.js";
import { catchUp } from "../../src/runner/catch-up.js";
import type { FireRequest } from "../../src/runner/types.js";
import { StateStore } from "../../src/store/state.js";
import { CronTrigger } from "../../src/triggers/cron.js";
import { captureLog } from "../support/log-capture.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function job(name: string, schedule: Schedule, extra: Partial<Job> = {}): Job {
  return {
    name,
    file: `/jobs/${name}.yaml`,
    timezone: "UTC",
    prompt: "Go.",
    ...jobDefaults(),
    schedule,
    timeoutMs: 60_000,
    catchUpMs: 0,
    retry: { attempts: 0, backoffMs: 0 },
    ...extra,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(20);
  }
}

let dir: string;
let state: StateStore;
let fires: Array<FireRequest & { firedAt: number }>;
let captured: ReturnType<typeof captureLog>;
const triggers: CronTrigger[] = [];

function trigger(now?: () => Date): CronTrigger {
  const t = new CronTrigger({
    state,
    now,
    fire: (req) => fires.push({ ...req, firedAt: Date.now() }),
    log: captured.log,
  });
  triggers.push(t);
  return t;
}

const stateOnDisk = () =>
  JSON.parse(readFileSync(join(dir, "state.json"), "utf8")) as { jobs: Record<string, { lastScheduledAt?: string; done?: boolean }> };

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-cron-"));
  state = await StateStore.open(dir);
  fires = [];
  captured = captureLog();
});

afterEach(async () => {
  for (const t of triggers.splice(0)) t.stop();
  // A fire's state write may still be on its way: removing the folder under it fails with ENOTEMPTY.
  await state.close();
  await rm(dir, { recursive: true, force: true });
});

describe("CronTrigger with real timers", () => {
  it("fires a six-field cron every second, for the whole-second slot, and saves the last slot", async () => {
    const t = trigger();
    t.set([job("tick", { kind: "cron", expression: "* * * * * *" })]);
    await sleep(3_000);
    t.stop();

    expect(fires.length).toBeGreaterThanOrEqual(2);
    expect(fires.length).toBeLessThanOrEqual(4);
    const slots = fires.map((f) => f.scheduledAt.getTime());
    for (const [i, fire] of fires.entries()) {
      expect(fire).toMatchObject({ job: "tick", reason: "schedule" });
      expect(slots[i]! % 1_000).toBe(0);
      expect(fire.firedAt).toBeGreaterThanOrEqual(slots[i]!);
      if (i > 0) expect(slots[i]).toBeGreaterThan(slots[i - 1]!);
    }
    const last = fires.at(-1)!.scheduledAt.toISOString();
    await waitFor(() => stateOnDisk().jobs.tick?.lastScheduledAt === last);
  });

  it("fires `every` on the multiples of its interval", async () => {
    const t = trigger();
    t.set([job("pulse", { kind: "every", intervalMs: 400 })]);
    await sleep(1_300);
    t.stop();

    expect(fires.length).toBeGreaterThanOrEqual(2);
    expect(fires.length).toBeLessThanOrEqual(4);
    for (const fire of fires) expect(fire.scheduledAt.getTime() % 400).toBe(0);
  });

  it("fires `at` once, saving done to disk before handing it on", async () => {
    const date = new Date(Date.now() + 300);
    const doneOnDiskAtFire: Array<boolean | undefined> = [];
    const t = new CronTrigger({
      state,
      fire: (req) => {
        fires.push({ ...req, firedAt: Date.now() });
        doneOnDiskAtFire.push(stateOnDisk().jobs.once?.done);
      },
      log: captured.log,
    });
    triggers.push(t);
    t.set([job("once", { kind: "at", date })]);
    await waitFor(() => fires.length === 1);
    await sleep(300);

    expect(fires).toEqual([expect.objectContaining({ job: "once", reason: "schedule", scheduledAt: date })]);
    expect(doneOnDiskAtFire).toEqual([true]);
    expect(t.nextFires("once", 3)).toEqual([]);
  });

  it("never arms a done one-shot again after a restart, even if its time looks ahead", async () => {
    const date = new Date(Date.now() + 200);
    const once = job("once", { kind: "at", date }, { catchUpMs: HOUR });
    trigger().set([once]);
    await waitFor(() => fires.length === 1);
    await waitFor(() => stateOnDisk().jobs.once?.done === true);

    // A restart on the same state directory, with the clock set back before the job's time.
    state = await StateStore.open(dir);
    const restarted = trigger(() => new Date(date.getTime() - 200));
    restarted.set([once]);
    expect(restarted.nextFires("once", 1)).toEqual([]);
    expect(catchUp(once, state.job("once"), new Date(date.getTime() + 1_000))).toBeUndefined();
    await sleep(600);
    expect(fires).toHaveLength(1);
  });

  it("stops a removed or disabled job and re-arms a changed one", async () => {
    const t = trigger();
    const tick = job("tick", { kind: "cron", expression: "* * * * * *" });
    t.set([tick]);
    await waitFor(() => fires.length >= 1);

    t.set([{ ...tick, enabled: false }]);
    expect(t.nextFires("tick", 1)).toEqual([]);
    const afterDisable = fires.length;
    await sleep(1_300);
    expect(fires).toHaveLength(afterDisable);

    const date = new Date(Date.now() + 300);
    t.set([{ ...tick, schedule: { kind: "at", date } }]);
    expect(t.nextFires("tick", 3)).toEqual([date]);
    await waitFor(() => fires.length === afterDisable + 1);
    expect(fires.at(-1)?.scheduledAt).toEqual(date);

    t.set([job("hourly", { kind: "every", intervalMs: HOUR })]);
    expect(t.nextFires("tick", 1)).toEqual([]);
  });

  it("keeps an unchanged job's pending slot across set(), and re-arms a changed one from now", () => {
    let now = new Date("2026-05-01T10:07:00Z");
    const t = trigger(() => now);
    const hourly = job("hourly", { kind: "cron", expression: "0 * * * *" });
    t.set([hourly]);
    expect(t.nextFires("hourly", 2)).toEqual([new Date("2026-05-01T11:00:00Z"), new Date("2026-05-01T12:00:00Z")]);

    now = new Date("2026-05-01T10:30:00Z");
    t.set([{ ...hourly, prompt: "Edited prompt." }]);
    expect(t.nextFires("hourly", 1)).toEqual([new Date("2026-05-01T11:00:00Z")]);

    t.set([{ ...hourly, timezone: "Asia/Kolkata" }]); // UTC+05:30: local hours fall on :30 UTC
    expect(t.nextFires("hourly", 1)).toEqual([new Date("2026-05-01T11:30:00Z")]);
  });

  it("logs a job whose timezone is unknown and still serves the others", async () => {
    const t = trigger();
    t.set([
      job("lost", { kind: "cron", expression: "* * * * * *" }, { timezone: "Mars/Olympus" }),
      job("tick", { kind: "cron", expression: "* * * * * *" }),
    ]);
    expect(captured.lines).toContainEqual({
      level: "error",
      msg: "cannot compute the job's next fire, not scheduled",
      fields: { component: "cron", job: "lost", file: "/jobs/lost.yaml", error: expect.stringContaining("Mars/Olympus") },
    });
    await waitFor(() => fires.length >= 1);
    expect(new Set(fires.map((f) => f.job))).toEqual(new Set(["tick"]));
  });
});

describe("a slot missed while countd could not run (machine asleep)", () => {
  /** A clock 200 ms before the next whole hour, that can jump ahead. */
  /** Jumps land half an hour past a slot: landing on one would race the slot that is due right then. */
  function sleepyClock() {
    const nextHour = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
    let offset = nextHour - 200 - Date.now();
    return { nextHour, now: () => new Date(Date.now() + offset), jump: (ms: number) => (offset += ms) };
  }

  it("is caught up once, for the latest slot, within the job's catch_up window", async () => {
    const clock = sleepyClock();
    const t = trigger(clock.now);
    t.set([job("hourly", { kind: "every", intervalMs: HOUR }, { catchUpMs: HOUR })]);
    clock.jump(3 * DAY + HOUR / 2);
    await waitFor(() => fires.length === 1);
    await sleep(300);

    expect(fires).toEqual([
      expect.objectContaining({ job: "hourly", reason: "catch-up", scheduledAt: new Date(clock.nextHour + 3 * DAY) }),
    ]);
    expect(t.nextFires("hourly", 1)).toEqual([new Date(clock.nextHour + 3 * DAY + HOUR)]);
  });

  it("is skipped and logged with catch_up 0", async () => {
    const clock = sleepyClock();
    const t = trigger(clock.now);
    t.set([job("hourly", { kind: "every", intervalMs: HOUR })]);
    clock.jump(3 * DAY + HOUR / 2);
    await waitFor(() => captured.lines.some((l) => l.level === "warn"));

    expect(fires).toEqual([]);
    expect(captured.lines).toContainEqual({
      level: "warn",
      msg: expect.stringMatching(/^slot missed while countd could not run/),
      fields: expect.objectContaining({ component: "cron", job: "hourly", slot: new Date(clock.nextHour).toISOString() }),
    });
    expect(t.nextFires("hourly", 1)).toEqual([new Date(clock.nextHour + 3 * DAY + HOUR)]);
  });
});
