/**
 * When a job's schedule fires. Cron expressions are croner 11's; `every` and `at` are plain
 * arithmetic.
 *
 * `cron`: 5 fields (minute precision) or 6 (a leading seconds field), read in the job's IANA
 * timezone. Around daylight-saving changes croner behaves like Vixie cron (and croner-rust), and
 * sorts every expression into one of two kinds:
 * - Fixed-time: a single value in each of the second, minute and hour fields (`30 2 * * *`).
 *   - A local time that does not exist (spring forward) runs at the first instant after the gap,
 *     on the same day: `30 2 * * *` in America/New_York on 2026-03-08 runs at 03:00 EDT
 *     (07:00Z); in Europe/Berlin on 2026-03-29 at 03:00 CEST (01:00Z).
 *   - A local time that occurs twice (fall back) runs once, at its first occurrence: `30 1 * * *`
 *     in America/New_York on 2026-11-01 runs at 01:30 EDT (05:30Z) and not at 01:30 EST;
 *     `30 2 * * *` in Europe/Berlin on 2026-10-25 at 02:30 CEST (00:30Z) only.
 * - Interval: a wildcard, step, range or list in any of those fields (`0 * * * *`, `0,30 * * * *`,
 *   and also `30 2,14 * * *`).
 *   - Times inside a spring-forward gap are skipped: `0,30 * * * *` in New York on 2026-03-08
 *     goes 01:30 EST (06:30Z) → 03:00 EDT (07:00Z); `30 2,14 * * *` has no 02:30 run that day.
 *   - Times that occur twice run on both occurrences: the same job on 2026-11-01 runs at
 *     01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST (05:00Z, 05:30Z, 06:00Z, 06:30Z).
 * - Every other time keeps its local wall-clock time: `0 9 * * *` in New York is 14:00Z before
 *   2026-03-08 and 13:00Z from that day on.
 *
 * `every`: elapsed time, blind to timezones and DST. Slots are the whole multiples of the interval
 * counted from the Unix epoch (1970-01-01T00:00:00Z), so they do not move when countd restarts or a
 * job file is edited, and an interval that divides an hour falls on the clock (`every: 30m` fires
 * at :00 and :30 in every zone whose offset is whole hours), while `every: 1d` fires at 00:00 UTC.
 *
 * `at`: one exact instant.
 */
import { CRON_MODE } from "../jobs/schema.js";
import { Cron } from "croner";
import type { Schedule } from "../jobs/types.js";

/**
 * A croner schedule with the options countd reads cron expressions with; the job loader validates
 * with it too, so what loads is what runs. Throws croner's error for a bad expression; a bad
 * timezone only throws once a time is computed.
 */
export function parseCron(expression: string, timezone: string): Cron {
  return new Cron(expression, { timezone, mode: CRON_MODE });
}

/** The next `count` fire times strictly after `from`, earliest first (fewer for a one-shot). */
export function nextFires(schedule: Schedule, timezone: string, from: Date, count: number): Date[] {
  switch (schedule.kind) {
    case "cron":
      return parseCron(schedule.expression, timezone).nextRuns(count, from);
    case "every": {
      const first = (Math.floor(from.getTime() / schedule.intervalMs) + 1) * schedule.intervalMs;
      return Array.from({ length: count }, (_, i) => new Date(first + i * schedule.intervalMs));
    }
    case "at":
      return count > 0 && schedule.date > from ? [schedule.date] : [];
  }
}

/** The latest fire time strictly before `before`, if there is one (for catch-up). */
export function previousFire(schedule: Schedule, timezone: string, before: Date): Date | undefined {
  switch (schedule.kind) {
    case "cron":
      return parseCron(schedule.expression, timezone).previousRuns(1, before)[0];
    case "every":
      return new Date((Math.ceil(before.getTime() / schedule.intervalMs) - 1) * schedule.intervalMs);
    case "at":
      return schedule.date < before ? schedule.date : undefined;
  }
}
