/** One reading of the wall clock in a time zone, for prompts, templates, subjects and decisions. */
export interface LocalClock {
  /** YYYY-MM-DD: the calendar day in the time zone (daily caps count by it). */
  date: string;
  /** HH:MM, 24-hour. */
  time: string;
  /** YYYY-MM-DDTHH:MM:SS±HH:MM, with the offset in force at that instant. */
  datetime: string;
  /** Minutes after local midnight. */
  minutes: number;
  /** English weekday name, e.g. "Monday". */
  weekday: string;
  /** "+08:00", "-05:00", or "+00:00". */
  offset: string;
}

/**
 * The one clock every placeholder of a run reads (the prompt, mail subjects): when the run
 * started, in its job's zone. Made once per run, so no two of them can show different times.
 */
export interface RunClock {
  at: Date;
  /** IANA name: the job's. */
  timeZone: string;
}

/** Minutes after midnight as HH:MM, 24-hour. */
export const hhmm = (minutes: number): string =>
  `${String(Math.floor(minutes / 60)).padStart(2, "0")}:${String(minutes % 60).padStart(2, "0")}`;

/** Building an Intl.DateTimeFormat costs far more than formatting with one; there is one per zone. */
const formats = new Map<string, Intl.DateTimeFormat>();

/**
 * The last reading per zone: formatToParts costs some 40 µs, and a run reads the clock of the
 * same second several times (its prompt, each call's budget day, its deliveries).
 */
const lastReading = new Map<string, { second: number; clock: LocalClock }>();

export function localClock(at: Date, timeZone: string): LocalClock {
  const second = Math.floor(at.getTime() / 1000);
  const last = lastReading.get(timeZone);
  if (last?.second === second) return { ...last.clock };
  const clock = readClock(at, timeZone);
  lastReading.set(timeZone, { second, clock: { ...clock } });
  return clock;
}

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

function readClock(at: Date, timeZone: string): LocalClock {
  // UTC needs no zone data: ICU's first formatter costs a command 10-15 ms (croner is given an
  // offset of 0 for UTC likewise, jobs/schedule.ts).
  if (timeZone === "UTC") {
    const iso = at.toISOString();
    return {
      date: iso.slice(0, 10),
      time: iso.slice(11, 16),
      datetime: `${iso.slice(0, 19)}+00:00`,
      minutes: at.getUTCHours() * 60 + at.getUTCMinutes(),
      weekday: WEEKDAYS[at.getUTCDay()]!,
      offset: "+00:00",
    };
  }
  let format = formats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
      weekday: "long",
      timeZoneName: "longOffset",
    });
    formats.set(timeZone, format);
  }
  const p = Object.fromEntries(format.formatToParts(at).map((part) => [part.type, part.value])) as Record<
    Intl.DateTimeFormatPartTypes,
    string
  >;
  const date = `${p.year}-${p.month}-${p.day}`;
  const time = `${p.hour}:${p.minute}`;
  // "GMT+08:00", or a bare "GMT" when the offset is zero.
  const offset = p.timeZoneName.replace(/^GMT/, "") || "+00:00";
  return {
    date,
    time,
    datetime: `${date}T${time}:${p.second}${offset}`,
    minutes: Number(p.hour) * 60 + Number(p.minute),
    weekday: p.weekday,
    offset,
  };
}

/**
 * How countd shows a time to a person, in the CLI, the console's API answers and mail alike:
 * `2026-12-01 09:00:05 -05:00`, local to `timeZone` with its offset. A job's times are shown in
 * the job's zone, times tied to no job in countd.yaml's; `--json` and the API carry UTC instants.
 */
export function shownTime(at: Date | string, timeZone: string, seconds = true): string {
  const clock = localClock(typeof at === "string" ? new Date(at) : at, timeZone);
  return `${clock.date} ${seconds ? clock.datetime.slice(11, 19) : clock.time} ${clock.offset}`;
}

/** LocalClock.weekday in Chinese, for prompts in the zh locale. */
export const WEEKDAYS_ZH: Readonly<Record<string, string>> = {
  Monday: "星期一",
  Tuesday: "星期二",
  Wednesday: "星期三",
  Thursday: "星期四",
  Friday: "星期五",
  Saturday: "星期六",
  Sunday: "星期日",
};

/** Longer than any IANA name; ICU takes seconds to refuse a name of a few hundred kilobytes. */
export const MAX_TIME_ZONE_LENGTH = 64;

/**
 * Names known good: the zones ICU lists (read once, in a few milliseconds), UTC, which ICU accepts
 * without listing it, and each name ICU has accepted since. ICU's first formatter costs a command
 * or a start-up more than a dozen milliseconds, and one job file after another repeats the same
 * few names.
 */
let goodZones: Set<string> | undefined;

/** Whether `name` is a time zone this machine's ICU data knows. */
export function isTimeZone(name: string): boolean {
  if (name.length > MAX_TIME_ZONE_LENGTH) return false;
  goodZones ??= new Set([...Intl.supportedValuesOf("timeZone"), "UTC"]);
  if (goodZones.has(name)) return true;
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    goodZones.add(name);
    return true;
  } catch {
    return false;
  }
}
