import { describe, expect, it } from "vitest";
import { localClock } from "../src/time.js";

describe("localClock", () => {
  it("reads each zone's own wall clock, also when two zones are read in the same second", () => {
    const at = new Date("2026-07-01T06:30:15.250Z");
    expect(localClock(at, "Asia/Shanghai")).toEqual({
      date: "2026-07-01",
      time: "14:30",
      datetime: "2026-07-01T14:30:15+08:00",
      minutes: 870,
      weekday: "Wednesday",
      offset: "+08:00",
    });
    expect(localClock(new Date(at.getTime() + 500), "America/New_York").datetime).toBe("2026-07-01T02:30:15-04:00");
    expect(localClock(at, "UTC").datetime).toBe("2026-07-01T06:30:15+00:00");
  });

  it("gives the next second's reading, not the last one's, and a reading changed by its reader does not change the next", () => {
    const at = new Date("2026-12-31T23:59:59.900Z");
    const first = localClock(at, "UTC");
    first.date = "changed";
    expect(localClock(new Date(at.getTime() + 50), "UTC").date).toBe("2026-12-31");
    expect(localClock(new Date(at.getTime() + 100), "UTC")).toMatchObject({ date: "2027-01-01", time: "00:00", weekday: "Friday" });
  });

  it("reads UTC without zone data exactly as ICU reads Etc/UTC", () => {
    let at = Date.UTC(1971, 0, 1, 0, 0, 0);
    const step = 7_919_993_213; // about 92 days and an odd number of seconds: every hour, minute and weekday comes up
    for (let i = 0; i < 250; i++, at += step) {
      const utc = localClock(new Date(at), "UTC");
      expect(utc).toEqual(localClock(new Date(at), "Etc/UTC"));
    }
  });
});
