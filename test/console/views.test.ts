import { describe, expect, it } from "vitest";
import { statsView } from "../../src/console/views.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord, RunStatus } from "../../src/store/run-record.js";

function run(startedAt: string, status: RunStatus, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    id: `id-${startedAt}`,
    job: "report",
    reason: "schedule",
    scheduledAt: startedAt,
    startedAt,
    finishedAt: new Date(Date.parse(startedAt) + 2_000).toISOString(),
    status,
    iterations: 1,
    toolCalls: 0,
    usage: { ...emptyUsage(), inputTokens: 100, outputTokens: 20 },
    sessionId: "cron:report",
    ...extra,
  };
}

describe("statsView", () => {
  it("counts runs and their cost on the day of the zone they started in, every day shown, also across a 23-hour day", () => {
    // Europe/Berlin springs forward on 2026-03-29: that day has 23 hours.
    const now = new Date("2026-03-30T22:30:00Z"); // 00:30 on 31 March in Berlin
    const runs = [
      run("2026-03-28T23:30:00Z", "ok", { cost: 0.5 }), // 00:30 on the 29th in Berlin
      run("2026-03-29T21:59:00Z", "budget", { cost: 0.25 }), // 23:59 on the 29th (UTC+2 by then)
      run("2026-03-30T22:00:00Z", "ok", { cost: null }), // 00:00 on the 31st, an unpriced model
      run("2026-03-30T22:10:00Z", "running", { finishedAt: undefined }),
      run("2026-03-25T10:00:00Z", "ok", { cost: 2 }), // before the days shown
    ];
    const stats = statsView(runs, 4, "Europe/Berlin", now);
    expect(stats.timezone).toBe("Europe/Berlin");
    expect(stats.days).toEqual([
      { date: "2026-03-28", by_status: {}, cost: 0, unpriced: 0 },
      { date: "2026-03-29", by_status: { ok: 1, budget: 1 }, cost: 0.75, unpriced: 0 },
      { date: "2026-03-30", by_status: {}, cost: 0, unpriced: 0 },
      // The run in progress has no cost yet: it adds nothing, and is not unpriced.
      { date: "2026-03-31", by_status: { ok: 1, running: 1 }, cost: 0, unpriced: 1 },
    ]);
    // The runs that ended, oldest first, with duration, tokens and cost.
    expect(stats.runs.map((r) => [r.started_at, r.status, r.duration_ms, r.tokens, r.cost])).toEqual([
      ["2026-03-28T23:30:00Z", "ok", 2_000, 120, 0.5],
      ["2026-03-29T21:59:00Z", "budget", 2_000, 120, 0.25],
      ["2026-03-30T22:00:00Z", "ok", 2_000, 120, null],
    ]);
  });

  it("leaves out each run's point when only the days are asked for (the overview of every job)", () => {
    const stats = statsView([run("2026-12-02T08:00:00Z", "ok")], 1, "UTC", new Date("2026-12-02T12:00:00Z"), false);
    expect(stats).toEqual({ timezone: "UTC", days: [{ date: "2026-12-02", by_status: { ok: 1 }, cost: 0, unpriced: 0 }], runs: [] });
  });

  it("gives no cost to a run recorded before pricing: its point has none, its day counts it neither as spent nor as unpriced", () => {
    const stats = statsView([run("2026-12-02T08:00:00Z", "ok")], 1, "UTC", new Date("2026-12-02T12:00:00Z"));
    expect(stats.days).toEqual([{ date: "2026-12-02", by_status: { ok: 1 }, cost: 0, unpriced: 0 }]);
    expect(stats.runs[0]).not.toHaveProperty("cost");
  });
});
