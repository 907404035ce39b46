import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SpendLedger, type SpendLine } from "../../src/store/spend-ledger.js";

const call = (at: string, run: string): SpendLine => ({
  at,
  job: "report",
  run,
  model: "m",
  usage: { inputTokens: 10, outputTokens: 1, cachedInputTokens: 0, cacheWriteTokens: 0 },
  cost: 0.01,
});

const runsIn = async (file: string) =>
  (await readFile(file, "utf8"))
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => (JSON.parse(line) as SpendLine).run);

describe("the spend file a ledger keeps open between calls", () => {
  it("keeps every call's line: after its file or folder is removed, after another process's torn line, across a UTC day", async () => {
    const state = await mkdtemp(join(tmpdir(), "countd-spend-"));
    try {
      const ledger = await SpendLedger.open(state);
      const day = join(state, "spend", "2026-12-05.jsonl");
      ledger.record(call("2026-12-05T10:00:00.000Z", "r1"));
      ledger.record(call("2026-12-05T10:00:01.000Z", "r2"));
      await ledger.flush();
      expect(await runsIn(day)).toEqual(["r1", "r2"]);

      // Another writer (`countd run`) died mid-line: the next line starts on a line of its own.
      await appendFile(day, '{"at":"2026-12-05T10:00:02');
      ledger.record(call("2026-12-05T10:00:03.000Z", "r3"));
      await ledger.flush();
      expect(
        (await readFile(day, "utf8"))
          .split("\n")
          .filter(Boolean)
          .map((line) => line.slice(0, 6)),
      ).toEqual(['{"at":', '{"at":', '{"at":', '{"at":']);
      const parsed = (await readFile(day, "utf8")).split("\n").flatMap((line) => {
        try {
          return [(JSON.parse(line) as SpendLine).run];
        } catch {
          return [];
        }
      });
      expect(parsed).toEqual(["r1", "r2", "r3"]);

      // The file removed by hand, then the whole folder: each next line is in a file of that name again.
      await rm(day);
      ledger.record(call("2026-12-05T10:00:04.000Z", "r4"));
      await ledger.flush();
      expect(await runsIn(day)).toEqual(["r4"]);
      await rm(join(state, "spend"), { recursive: true });
      ledger.record(call("2026-12-05T10:00:05.000Z", "r5"));
      await ledger.flush();
      expect(await runsIn(day)).toEqual(["r5"]);

      // The next UTC day's call goes to the next day's file; the first day's stays as it was.
      ledger.record(call("2026-12-06T00:00:01.000Z", "r6"));
      await ledger.flush();
      expect(await runsIn(join(state, "spend", "2026-12-06.jsonl"))).toEqual(["r6"]);
      expect(await runsIn(day)).toEqual(["r5"]);
    } finally {
      await rm(state, { recursive: true, force: true });
    }
  });
});

describe("what a ledger says a day spent", () => {
  /** The day of `at` on a wall clock in `timeZone`, as ICU gives it: YYYY-MM-DD. */
  const dayIn = (at: Date, timeZone: string) =>
    new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(at);

  it("sums each zone's own day, where midnight falls on a quarter or half hour in UTC too, and again from the files", async () => {
    const state = await mkdtemp(join(tmpdir(), "countd-spend-"));
    try {
      const now = new Date("2026-12-06T06:00:00.000Z");
      const ledger = await SpendLedger.open(state, { now: () => now });
      // A call every 5 minutes for two and a quarter days, two jobs, so every zone's midnight has calls on both sides.
      const lines: SpendLine[] = [];
      for (let at = Date.parse("2026-12-04T00:00:00.000Z"); at <= now.getTime(); at += 5 * 60_000) {
        for (const [job, cost] of [
          ["a", 0.01],
          ["b", 0.025],
        ] as const) {
          const line = { ...call(new Date(at).toISOString(), `run-${at}`), job, cost };
          lines.push(line);
          ledger.record(line);
        }
      }
      await ledger.flush();
      const reopened = await SpendLedger.open(state, { now: () => now });
      for (const timeZone of [
        "UTC",
        "Asia/Kathmandu",
        "America/St_Johns",
        "Australia/Eucla",
        "Pacific/Chatham",
        "Pacific/Kiritimati",
        "Pacific/Pago_Pago",
      ]) {
        const today = dayIn(now, timeZone);
        for (const job of [undefined, "a"]) {
          const counted = lines.filter((line) => dayIn(new Date(line.at), timeZone) === today && (job === undefined || line.job === job));
          const expected = { tokens: counted.length * 11, cost: counted.reduce((sum, line) => sum + line.cost!, 0) };
          for (const book of [ledger, reopened]) {
            const spent = book.today(timeZone, job);
            expect(spent.date, timeZone).toBe(today);
            expect(spent.tokens, `${timeZone} ${job ?? "all"}`).toBe(expected.tokens);
            expect(spent.cost, `${timeZone} ${job ?? "all"}`).toBeCloseTo(expected.cost, 9);
          }
        }
      }
    } finally {
      await rm(state, { recursive: true, force: true });
    }
  });
});
