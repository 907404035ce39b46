import { describe, expect, it } from "vitest";
import type { Schedule } from "../../src/jobs/types.js";
import { cronProblem, nextFires, parseCron, previousFire } from "../../src/jobs/schedule.js";

const cron = (expression: string): Schedule => ({ kind: "cron", expression });
const iso = (dates: Date[]) => dates.map((d) => d.toISOString());
const MINUTE = 60_000;

describe("nextFires across the 2026 DST changes", () => {
  it.each([
    // America/New_York, spring forward on 2026-03-08: 02:00 EST becomes 03:00 EDT.
    [
      "fixed time in the gap runs when the clock has jumped",
      "30 2 * * *",
      "America/New_York",
      "2026-03-07T12:00:00Z",
      ["2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"],
    ],
    [
      "six-field fixed time behaves the same",
      "0 30 2 * * *",
      "America/New_York",
      "2026-03-07T12:00:00Z",
      ["2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"],
    ],
    [
      "interval job skips the missing half hours",
      "0,30 * * * *",
      "America/New_York",
      "2026-03-08T06:00:00Z",
      ["2026-03-08T06:30:00.000Z", "2026-03-08T07:00:00.000Z", "2026-03-08T07:30:00.000Z"],
    ],
    [
      "a list of hours is an interval job: no 02:30 that day",
      "30 2,14 * * *",
      "America/New_York",
      "2026-03-07T12:00:00Z",
      ["2026-03-07T19:30:00.000Z", "2026-03-08T18:30:00.000Z", "2026-03-09T06:30:00.000Z"],
    ],
    [
      "09:00 stays 09:00 local",
      "0 9 * * *",
      "America/New_York",
      "2026-03-07T00:00:00Z",
      ["2026-03-07T14:00:00.000Z", "2026-03-08T13:00:00.000Z"],
    ],
    // America/New_York, fall back on 2026-11-01: 02:00 EDT becomes 01:00 EST.
    [
      "fixed time that occurs twice runs at the first occurrence only",
      "30 1 * * *",
      "America/New_York",
      "2026-10-31T12:00:00Z",
      ["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"],
    ],
    [
      "interval job runs through both passes of the repeated hour",
      "0,30 * * * *",
      "America/New_York",
      "2026-11-01T04:45:00Z",
      [
        "2026-11-01T05:00:00.000Z",
        "2026-11-01T05:30:00.000Z",
        "2026-11-01T06:00:00.000Z",
        "2026-11-01T06:30:00.000Z",
        "2026-11-01T07:00:00.000Z",
      ],
    ],
    [
      "09:00 stays 09:00 local",
      "0 9 * * *",
      "America/New_York",
      "2026-10-31T00:00:00Z",
      ["2026-10-31T13:00:00.000Z", "2026-11-01T14:00:00.000Z"],
    ],
    // Europe/Berlin, spring forward on 2026-03-29: 02:00 CET becomes 03:00 CEST.
    [
      "fixed time in the gap runs when the clock has jumped",
      "30 2 * * *",
      "Europe/Berlin",
      "2026-03-28T12:00:00Z",
      ["2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"],
    ],
    [
      "hourly job has no 02:00 that day",
      "0 * * * *",
      "Europe/Berlin",
      "2026-03-28T23:30:00Z",
      ["2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-29T02:00:00.000Z"],
    ],
    // Europe/Berlin, fall back on 2026-10-25: 03:00 CEST becomes 02:00 CET.
    [
      "fixed time that occurs twice runs at the first occurrence only",
      "30 2 * * *",
      "Europe/Berlin",
      "2026-10-24T12:00:00Z",
      ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"],
    ],
    [
      "fixed time between its two occurrences waits for the next day",
      "30 2 * * *",
      "Europe/Berlin",
      "2026-10-25T00:45:00Z",
      ["2026-10-26T01:30:00.000Z"],
    ],
    [
      "hourly job runs at 02:00 CEST and again at 02:00 CET",
      "0 * * * *",
      "Europe/Berlin",
      "2026-10-24T23:30:00Z",
      ["2026-10-25T00:00:00.000Z", "2026-10-25T01:00:00.000Z", "2026-10-25T02:00:00.000Z"],
    ],
  ])("%s: %s in %s after %s", (_what, expression, timezone, from, expected) => {
    expect(iso(nextFires(cron(expression), timezone, new Date(from), expected.length))).toEqual(expected);
  });
});

describe("the next fire the loader found, used again when the job is armed", () => {
  it("is the one croner gives from any instant, also from before it was found and once it has passed", () => {
    const expression = "0 30 9 * * *";
    const timezone = "Asia/Tokyo";
    const found = new Date("2026-12-01T12:00:00Z");
    expect(cronProblem(expression, timezone, found)).toBeUndefined();
    for (const from of [
      "2026-12-01T12:00:00Z",
      "2026-12-01T23:00:00Z",
      "2026-12-02T00:29:59Z",
      "2026-12-02T00:30:00Z",
      "2026-12-01T00:00:00Z",
      "2026-12-05T03:00:00Z",
    ]) {
      expect(iso(nextFires(cron(expression), timezone, new Date(from), 1)), from).toEqual([
        parseCron(expression, timezone).nextRun(new Date(from))!.toISOString(),
      ]);
    }
  });

  it("is kept apart per timezone", () => {
    const from = new Date("2026-12-01T12:00:00Z");
    expect(cronProblem("0 9 * * *", "UTC", from)).toBeUndefined();
    expect(iso(nextFires(cron("0 9 * * *"), "Europe/Berlin", from, 1))).toEqual(["2026-12-02T08:00:00.000Z"]);
    expect(iso(nextFires(cron("0 9 * * *"), "UTC", from, 1))).toEqual(["2026-12-02T09:00:00.000Z"]);
  });
});

describe("UTC", () => {
  it.each(["0 9 * * 1-5", "*/7 * * * *", "30 2 * * *", "0 0 29 2 *", "15 30 */5 * * *"])(
    "fires %s at the same instants as Etc/UTC",
    (expression) => {
      const from = new Date("2026-02-27T23:58:00Z");
      expect(iso(nextFires(cron(expression), "UTC", from, 5))).toEqual(iso(nextFires(cron(expression), "Etc/UTC", from, 5)));
      expect(previousFire(cron(expression), "UTC", from)?.toISOString()).toBe(
        previousFire(cron(expression), "Etc/UTC", from)?.toISOString(),
      );
    },
  );
});

describe("previousFire", () => {
  it.each([
    ["30 2 * * *", "Europe/Berlin", "2026-10-25T03:00:00Z", "2026-10-25T00:30:00.000Z"],
    ["0 * * * *", "Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-25T01:00:00.000Z"],
    ["30 2 * * *", "America/New_York", "2026-03-09T00:00:00Z", "2026-03-08T07:00:00.000Z"],
    ["0 9 * * 1-5", "Asia/Shanghai", "2026-05-04T00:00:00Z", "2026-05-01T01:00:00.000Z"],
  ])("%s in %s before %s is %s", (expression, timezone, before, expected) => {
    expect(previousFire(cron(expression), timezone, new Date(before))?.toISOString()).toBe(expected);
  });

  it("is strictly before the reference", () => {
    const everySecond = cron("* * * * * *");
    expect(previousFire(everySecond, "UTC", new Date("2026-05-01T12:00:00.000Z"))?.toISOString()).toBe("2026-05-01T11:59:59.000Z");
    expect(previousFire(everySecond, "UTC", new Date("2026-05-01T12:00:00.001Z"))?.toISOString()).toBe("2026-05-01T12:00:00.000Z");
  });

  it("gives each instant its own latest fire, whatever was asked before", () => {
    const hourly = cron("0 * * * *");
    const asked = ["12:30:00", "12:10:00", "11:50:00", "12:00:00", "12:00:00.001", "13:00:00.001"];
    expect(
      asked.map((time) =>
        previousFire(hourly, "UTC", new Date(`2026-05-01T${time}Z`))
          ?.toISOString()
          .slice(11, 16),
      ),
    ).toEqual(["12:00", "12:00", "11:00", "11:00", "12:00", "13:00"]);
  });
});

describe("every", () => {
  const every30m: Schedule = { kind: "every", intervalMs: 30 * MINUTE };

  it("fires on the multiples of the interval since the Unix epoch, whatever the timezone", () => {
    const expected = ["2026-05-01T10:30:00.000Z", "2026-05-01T11:00:00.000Z", "2026-05-01T11:30:00.000Z"];
    for (const timezone of ["UTC", "Asia/Kolkata", "America/New_York"]) {
      expect(iso(nextFires(every30m, timezone, new Date("2026-05-01T10:07:13Z"), 3))).toEqual(expected);
    }
  });

  it("keeps elapsed time across a DST change", () => {
    const hourly: Schedule = { kind: "every", intervalMs: 60 * MINUTE };
    expect(iso(nextFires(hourly, "Europe/Berlin", new Date("2026-10-24T23:30:00Z"), 3))).toEqual([
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T01:00:00.000Z",
      "2026-10-25T02:00:00.000Z",
    ]);
  });

  it("counts strictly after `from` and strictly before `before`", () => {
    const slot = new Date("2026-05-01T10:30:00Z");
    expect(iso(nextFires(every30m, "UTC", slot, 1))).toEqual(["2026-05-01T11:00:00.000Z"]);
    expect(previousFire(every30m, "UTC", slot)?.toISOString()).toBe("2026-05-01T10:00:00.000Z");
    expect(previousFire(every30m, "UTC", new Date(slot.getTime() + 1))?.toISOString()).toBe("2026-05-01T10:30:00.000Z");
  });
});

describe("at", () => {
  const date = new Date("2026-12-01T01:00:00Z");
  const at: Schedule = { kind: "at", date };

  it("fires once, at its instant, if that is after `from`", () => {
    expect(iso(nextFires(at, "UTC", new Date("2026-11-30T00:00:00Z"), 3))).toEqual(["2026-12-01T01:00:00.000Z"]);
    expect(nextFires(at, "UTC", date, 3)).toEqual([]);
  });

  it("has its instant as the previous fire once it has passed", () => {
    expect(previousFire(at, "UTC", date)).toBeUndefined();
    expect(previousFire(at, "UTC", new Date(date.getTime() + 1))).toEqual(date);
  });
});

describe("parseCron", () => {
  it("accepts 5 and 6 fields and rejects 7, with croner's reason", () => {
    expect(() => parseCron("0 9 * * 1-5", "UTC")).not.toThrow();
    expect(() => parseCron("*/10 * * * * *", "UTC")).not.toThrow();
    expect(() => parseCron("0 0 9 * * * 2027", "UTC")).toThrow(/exactly 5 or 6 parts/);
    expect(() => parseCron("61 9 * * *", "UTC")).toThrow(/minute: 61/);
  });

  it("names a bad timezone once a time is computed", () => {
    expect(() => nextFires(cron("0 9 * * *"), "Mars/Olympus", new Date(), 1)).toThrow(/Mars\/Olympus/);
  });
});
