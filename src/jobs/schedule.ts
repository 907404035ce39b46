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
 *
 * The job schema and the loader check `schedule:` and `at:` with the functions here, so what loads
 * is what runs.
 */
import { Cron } from "croner";
import { describeValue } from "../config/fields.js";
import type { Schedule } from "./types.js";

/** 5 fields, or 6 with seconds first. croner would also take a 7th (year) field; the issue promises 5 or 6. */
const CRON_MODE = "5-or-6-parts";

/** Far longer than a real expression, even one listing every second and minute. */
const MAX_CRON_LENGTH = 1000;

/**
 * A croner schedule with the options countd reads cron expressions with. Throws croner's error
 * for a bad expression; a bad timezone only throws once a time is computed. Each one costs about
 * 80 KB while it lives (croner allocates a table per field), so none is kept. UTC is given as a
 * zero offset, the same instants without a DST rule: croner reads a named zone's clock through
 * Intl's formatToParts at every step of its search, and a next fire in UTC took three times as long.
 */
export function parseCron(expression: string, timezone: string): Cron {
  return new Cron(expression, timezone === "UTC" ? { utcOffset: 0, mode: CRON_MODE } : { timezone, mode: CRON_MODE });
}

/** How many next fires are remembered: more distinct schedules than a folder of 10,000 jobs has. */
const NEXT_FIRES_KEPT = 20_000;

/**
 * The next fire of an expression in a timezone, and the instant it was computed from. The loader
 * computes it when it checks a job, and the cron trigger asks for it again when it arms the job
 * moments later: the answer still holds as long as no fire lies in between, so the expression is
 * parsed and searched once per load rather than twice (croner was a fifth of the CPU time of a
 * start with 10,000 job files, and its tables most of the garbage).
 */
const nextFireMemo = new Map<string, { from: number; next: number | null }>();

function nextCronFire(expression: string, timezone: string, from: Date): Date | null {
  const key = `${timezone}\0${expression}`;
  const at = from.getTime();
  const known = nextFireMemo.get(key);
  if (known && known.from <= at && (known.next === null || known.next > at)) return known.next === null ? null : new Date(known.next);
  const next = parseCron(expression, timezone).nextRun(from);
  nextFireMemo.delete(key);
  nextFireMemo.set(key, { from: at, next: next?.getTime() ?? null });
  if (nextFireMemo.size > NEXT_FIRES_KEPT) nextFireMemo.delete(nextFireMemo.keys().next().value!);
  return next;
}

/** Why a cron expression is too long to be one; checked by the job schema, before anything is parsed. */
export function cronLengthProblem(expression: string): string | undefined {
  // croner quotes the expression in its errors: a huge one would fill the message twice.
  return expression.length > MAX_CRON_LENGTH
    ? `expected a cron expression of at most ${MAX_CRON_LENGTH} characters, got ${describeValue(expression)}`
    : undefined;
}

/**
 * Why croner refuses `expression`, or why it would never fire; undefined when it is usable. Checked
 * by the loader once the job's timezone is known, so the next fire it finds is the one the cron
 * trigger arms.
 */
export function cronProblem(expression: string, timezone: string, now: Date): string | undefined {
  const tooLong = cronLengthProblem(expression);
  if (tooLong) return tooLong;
  // croner words a count it refuses two ways (by its own limit of 7, and by the mode's 5 or 6): one message for both.
  const fields = expression.trim().split(/\s+/).length;
  if (!expression.trim().startsWith("@") && fields !== 5 && fields !== 6) {
    return `invalid cron expression ${describeValue(expression)}: it has ${fields} ${fields === 1 ? "field" : "fields"}; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)`;
  }
  try {
    return nextCronFire(expression, timezone, now) === null
      ? `cron expression ${describeValue(expression)} never fires (no date matches it)`
      : undefined;
  } catch (err) {
    return `invalid cron expression ${describeValue(expression)}: ${(err as Error).message.replace(/^Cron\w*: /, "")}`;
  }
}

/** An ISO 8601 date and time as `at:` takes it; without an offset it is read in the job's timezone. */
export const AT_FORM = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?(Z|[+-]\d{2}:\d{2})?$/;

/** croner rolls 2026-02-31 over into March; a date that does not exist is a typo, so it is refused. */
export function dateExists(value: string): boolean {
  const [year, month, day, hour, minute, second] = AT_FORM.exec(value)!
    .slice(1, 7)
    .map((part) => Number(part ?? 0)) as number[];
  const calendar = new Date(Date.UTC(year!, month! - 1, day!));
  return calendar.getUTCMonth() === month! - 1 && calendar.getUTCDate() === day && hour! < 24 && minute! < 60 && second! < 60;
}

/** The instant of an `at:` value of AT_FORM; croner reads one without an offset in `timezone`, as a user writing local time expects. */
export function parseAt(value: string, timezone: string): Date {
  return new Cron(value, { timezone, paused: true }).getOnce()!;
}

/** The next `count` fire times strictly after `from`, earliest first (fewer for a one-shot). */
export function nextFires(schedule: Schedule, timezone: string, from: Date, count: number): Date[] {
  switch (schedule.kind) {
    case "cron": {
      if (count !== 1) return parseCron(schedule.expression, timezone).nextRuns(count, from);
      const next = nextCronFire(schedule.expression, timezone, from);
      return next ? [next] : [];
    }
    case "every": {
      const first = (Math.floor(from.getTime() / schedule.intervalMs) + 1) * schedule.intervalMs;
      return Array.from({ length: count }, (_, i) => new Date(first + i * schedule.intervalMs));
    }
    case "at":
      return count > 0 && schedule.date > from ? [schedule.date] : [];
  }
}

/**
 * The latest fire before an instant, by expression and timezone, as nextFireMemo keeps the next:
 * catch-up asks for every job at the same instant when countd restarts, and jobs sharing a schedule
 * then cost one parse (with 9,000 cron jobs, parsing each cost seconds and most of the garbage).
 */
const previousFireMemo = new Map<string, { before: number; previous: number | null }>();

function previousCronFire(expression: string, timezone: string, before: Date): Date | undefined {
  const key = `${timezone}\0${expression}`;
  const at = before.getTime();
  const known = previousFireMemo.get(key);
  // Nothing fires between the remembered previous fire and the instant it was found for.
  if (known && at <= known.before && (known.previous === null || known.previous < at))
    return known.previous === null ? undefined : new Date(known.previous);
  const previous = parseCron(expression, timezone).previousRuns(1, before)[0];
  previousFireMemo.delete(key);
  previousFireMemo.set(key, { before: at, previous: previous?.getTime() ?? null });
  if (previousFireMemo.size > NEXT_FIRES_KEPT) previousFireMemo.delete(previousFireMemo.keys().next().value!);
  return previous;
}

/** The latest fire time strictly before `before`, if there is one (for catch-up). */
export function previousFire(schedule: Schedule, timezone: string, before: Date): Date | undefined {
  switch (schedule.kind) {
    case "cron":
      return previousCronFire(schedule.expression, timezone, before);
    case "every":
      return new Date((Math.ceil(before.getTime() / schedule.intervalMs) - 1) * schedule.intervalMs);
    case "at":
      return schedule.date < before ? schedule.date : undefined;
  }
}
