import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { silentLogger, type Logger } from "../log.js";
import * as z from "zod";
import type { Usage } from "../providers/types.js";
import { errorText } from "../text.js";
import { localClock } from "../time.js";
import { HeldAppends, readJsonLines } from "./jsonl.js";
import { isoTime } from "./quarantine.js";
import { usageShape } from "./run-history.js";

/** One priced LLM call, as `spend/<UTC date>.jsonl` keeps it. */
export interface SpendLine {
  /** ISO 8601. */
  at: string;
  /** The job the call was made for (`@heartbeat` for the heartbeat). */
  job: string;
  run: string;
  model: string;
  usage: Usage;
  /** USD; null for a model with no price. */
  cost: number | null;
  /** A call made by a rehearsal or a fork (src/rehearse/): real money, shown apart by `countd cost`. */
  mark?: "rehearsal";
}

/** What some calls spent: USD over the priced ones, tokens (input and output) over all. */
export interface Spent {
  cost: number;
  tokens: number;
}

export const SPEND_DIR = "spend";

const FILE = /^(\d{4}-\d{2}-\d{2})\.jsonl$/;
const DAY_MS = 86_400_000;
const QUARTER_MS = 15 * 60_000;

export const tokensOf = (usage: Usage): number => usage.inputTokens + usage.outputTokens;

/** The calls of one budget day, summed as they are recorded. */
interface Day {
  timeZone: string;
  date: string;
  total: Spent;
  jobs: Map<string, Spent>;
}

/** What a day spent as the budgets see it: `date` is the day in the time zone asked for. */
export type SpentToday = Spent & { date: string };

/**
 * Where the budgets count what LLM calls cost: this process's ledger below, or every node's calls
 * where daemons share a backend, which may take a round trip to answer.
 */
export interface SpendBook {
  /** Counts a call at once; writing it down happens behind. */
  record(line: SpendLine): void;
  /** What the calls of the current day in `timeZone` spent, of one job or of all. */
  today(timeZone: string, job?: string): SpentToday | Promise<SpentToday>;
  /** Resolves once every call recorded so far is written. */
  flush(): Promise<void>;
}

/**
 * Every LLM call's price, one line per call in `<state>/spend/<UTC date>.jsonl`, appended without
 * a sync: a crash or a power cut can lose the lines of the last moments, so a budget may let a
 * few calls more through after one, never fewer. The daemon and `countd run` append to the same
 * files (whole lines, O_APPEND), so both count against the day's budgets. The budgets read what
 * a day spent from memory: the last two UTC days, which cover the current day in every time
 * zone, summed by job in quarters of an hour. Every zone's day begins on a quarter-hour in UTC,
 * so a quarter lies within one day of any zone. Kept line by line, a daemon making 50 calls a
 * second grew by 0.8 MB a minute (the soak bench); summed, memory goes with jobs, not calls.
 * `countd cost` reads the files.
 */
export class SpendLedger implements SpendBook {
  /** By the start of each quarter-hour (UTC, ms), what each job's calls in it spent: two days' worth, 193 quarters at most. */
  private readonly quarters = new Map<number, Map<string, Spent>>();
  private day: Day | undefined;
  /** The day's file stays open: a line per LLM call, each opened anew, cost more than the rest of the run's writes. */
  private readonly appends = new HeldAppends();
  private written: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly now: () => Date,
    private readonly log: Logger,
  ) {}

  /** Reads the last two UTC days' files; a file that cannot be read is logged and counts as empty. */
  static async open(stateDir: string, opts: { now?: () => Date; log?: Logger } = {}): Promise<SpendLedger> {
    const now = opts.now ?? (() => new Date());
    const ledger = new SpendLedger(join(stateDir, SPEND_DIR), now, (opts.log ?? silentLogger).child({ component: "spend" }));
    const today = now().getTime();
    for (const at of [today - DAY_MS, today]) {
      const file = ledger.fileOf(new Date(at));
      try {
        for (const line of spendLinesOf(await readJsonLines(file))) ledger.count(line, spentOf(line));
      } catch (err) {
        ledger.log.error({ file, error: errorText(err) }, "could not read the spend file; its calls do not count against today's budgets");
      }
    }
    return ledger;
  }

  /** Appends the call's line; a failed append is logged, the call still counts. */
  record(line: SpendLine): void {
    const spent = spentOf(line);
    this.count(line, spent);
    if (this.day && localClock(new Date(line.at), this.day.timeZone).date === this.day.date) add(this.day, line.job, spent);
    const file = this.fileOf(new Date(line.at));
    this.written = this.appends
      .append(file, [line])
      .catch((err: unknown) => this.log.error({ file, error: errorText(err) }, "could not write a call's price to the spend file"));
  }

  today(timeZone: string, job?: string): SpentToday {
    const date = localClock(this.now(), timeZone).date;
    if (this.day?.timeZone !== timeZone || this.day.date !== date) this.day = this.sum(timeZone, date);
    const spent = job === undefined ? this.day.total : (this.day.jobs.get(job) ?? { cost: 0, tokens: 0 });
    return { ...spent, date };
  }

  flush(): Promise<void> {
    return this.written;
  }

  private sum(timeZone: string, date: string): Day {
    const day: Day = { timeZone, date, total: { cost: 0, tokens: 0 }, jobs: new Map() };
    for (const [start, jobs] of this.quarters) {
      if (localClock(new Date(start), timeZone).date !== date) continue;
      for (const [job, spent] of jobs) add(day, job, spent);
    }
    return day;
  }

  /** Adds what the call spent to its quarter-hour's sums. */
  private count(line: SpendLine, spent: Spent): void {
    const start = Math.floor(Date.parse(line.at) / QUARTER_MS) * QUARTER_MS;
    let jobs = this.quarters.get(start);
    if (!jobs) {
      // Old quarters go when a new one comes: with no calls none is added, and an old one never matches today.
      this.forget();
      jobs = new Map();
      this.quarters.set(start, jobs);
    }
    addTo(jobs, line.job, spent);
  }

  /** Drops quarters over two days old: no time zone's current day reaches back that far. */
  private forget(): void {
    const oldest = this.now().getTime() - 2 * DAY_MS;
    for (const start of this.quarters.keys()) if (start + QUARTER_MS <= oldest) this.quarters.delete(start);
  }

  private fileOf(at: Date): string {
    return join(this.dir, `${at.toISOString().slice(0, 10)}.jsonl`);
  }
}

const spentOf = (line: SpendLine): Spent => ({ cost: line.cost ?? 0, tokens: tokensOf(line.usage) });

function add(day: Day, job: string, spent: Spent): void {
  day.total.tokens += spent.tokens;
  day.total.cost += spent.cost;
  addTo(day.jobs, job, spent);
}

function addTo(jobs: Map<string, Spent>, job: string, spent: Spent): void {
  const sum = jobs.get(job) ?? { cost: 0, tokens: 0 };
  sum.tokens += spent.tokens;
  sum.cost += spent.cost;
  jobs.set(job, sum);
}

const spendLineShape = z.looseObject({
  at: isoTime,
  job: z.string(),
  run: z.string(),
  model: z.string(),
  usage: usageShape,
  cost: z.number().nonnegative().nullable(),
  mark: z.literal("rehearsal").optional(),
}) satisfies z.ZodType<SpendLine>;

/** A line that is no call's price (torn by a crash, edited by hand) counts for nothing. */
export function spendLinesOf(values: unknown[]): SpendLine[] {
  return values.flatMap((value) => {
    const line = spendLineShape.safeParse(value);
    return line.success ? [line.data] : [];
  });
}

/** The lines of the calls made since `since`, oldest file first, for `countd cost`. */
export async function readSpend(stateDir: string, since: Date): Promise<SpendLine[]> {
  const dir = join(stateDir, SPEND_DIR);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const first = new Date(since.getTime() - DAY_MS).toISOString().slice(0, 10);
  const files = names.filter((name) => FILE.test(name) && name.slice(0, 10) >= first).sort();
  const lines: SpendLine[] = [];
  for (const name of files) {
    for (const line of spendLinesOf(await readJsonLines(join(dir, name)))) if (Date.parse(line.at) >= since.getTime()) lines.push(line);
  }
  return lines;
}
