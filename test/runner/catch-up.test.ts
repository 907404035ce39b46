import { describe, expect, it } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job, Schedule } from "../../src/jobs/types.js";
import { catchUp } from "../../src/runner/catch-up.js";

const HOUR = 3_600_000;

function job(schedule: Schedule, extra: Partial<Job> = {}): Job {
  return {
    name: "report",
    file: "/jobs/report.yaml",
    timezone: "UTC",
    prompt: "Report.",
    ...jobDefaults(),
    schedule,
    timeoutMs: 60_000,
    catchUpMs: HOUR,
    retry: { attempts: 0, backoffMs: 0 },
    ...extra,
  };
}

const hourly = job({ kind: "cron", expression: "0 * * * *" });
// Last fired Friday 09:00, back up Monday 09:20: 72 hourly slots went by.
const lastFire = { lastScheduledAt: "2026-05-01T09:00:00.000Z" };
const backUp = new Date("2026-05-04T09:20:00Z");

describe("catchUp", () => {
  it("after 3 days down, an hourly job gets exactly one run, for the last missed slot", () => {
    expect(catchUp(hourly, lastFire, backUp)).toEqual({ job: "report", reason: "catch-up", scheduledAt: new Date("2026-05-04T09:00:00Z") });
  });

  it("owes nothing when the last missed slot is outside the window", () => {
    expect(catchUp({ ...hourly, catchUpMs: 10 * 60_000 }, lastFire, backUp)).toBeUndefined();
  });

  it("owes nothing with catch_up 0", () => {
    expect(catchUp({ ...hourly, catchUpMs: 0 }, lastFire, backUp)).toBeUndefined();
  });

  it("owes nothing when the latest slot already fired", () => {
    expect(catchUp(hourly, { lastScheduledAt: "2026-05-04T09:00:00.000Z" }, backUp)).toBeUndefined();
  });

  it("owes nothing to a recurring job that never fired (first start)", () => {
    expect(catchUp(hourly, undefined, backUp)).toBeUndefined();
    expect(catchUp(hourly, {}, backUp)).toBeUndefined();
  });

  it("owes nothing to a disabled job", () => {
    expect(catchUp({ ...hourly, enabled: false }, lastFire, backUp)).toBeUndefined();
  });

  it("counts a slot exactly at start-up as missed", () => {
    const now = new Date("2026-05-04T09:00:00Z");
    expect(catchUp(hourly, lastFire, now)?.scheduledAt).toEqual(now);
  });

  it("reads the slot in the job's timezone, across a DST change", () => {
    const berlin = job({ kind: "cron", expression: "30 2 * * *" }, { timezone: "Europe/Berlin", catchUpMs: 2 * HOUR });
    // Down from Saturday to Sunday 02:45 CET, after both 02:30s of the fall-back night: the slot is the first.
    const req = catchUp(berlin, { lastScheduledAt: "2026-10-24T00:30:00.000Z" }, new Date("2026-10-25T01:45:00Z"));
    expect(req?.scheduledAt).toEqual(new Date("2026-10-25T00:30:00Z"));
  });

  it("works for `every`", () => {
    const every = job({ kind: "every", intervalMs: 30 * 60_000 });
    expect(catchUp(every, lastFire, backUp)?.scheduledAt).toEqual(new Date("2026-05-04T09:00:00Z"));
  });

  describe("one-shot `at`", () => {
    const at = job({ kind: "at", date: new Date("2026-05-04T09:00:00Z") });

    it("missed during downtime and not done: one run within the window", () => {
      expect(catchUp(at, undefined, backUp)).toEqual({ job: "report", reason: "catch-up", scheduledAt: new Date("2026-05-04T09:00:00Z") });
    });

    it("done: never again", () => {
      expect(catchUp(at, { lastScheduledAt: "2026-05-04T09:00:00.000Z", done: true }, backUp)).toBeUndefined();
    });

    it("outside the window, or still ahead: nothing", () => {
      expect(catchUp(at, undefined, new Date("2026-05-04T10:00:01Z"))).toBeUndefined();
      expect(catchUp(at, undefined, new Date("2026-05-04T08:59:59Z"))).toBeUndefined();
    });
  });
});
