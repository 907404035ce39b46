import type { FailingStreak, StateStore } from "../store/state.js";

/** A job file's `on_failure_repeat` default. */
export const DEFAULT_FAILURE_REPEAT_MS = 3_600_000;

/** Where each job's failing streak is kept between runs. */
export interface StreakStore {
  /** As saved now: where daemons share a backend, the job's last run may have ended on another daemon. */
  get(job: string): Promise<FailingStreak | undefined>;
  set(job: string, streak: FailingStreak | undefined): Promise<void>;
}

/** In the job state (state.json, or the shared backend's), so the throttle holds across restarts and daemons. */
export function stateStreaks(state: StateStore): StreakStore {
  return {
    get: async (job) => {
      // Redis away: the daemon's copy, rather than no report at all.
      await state.refresh().catch(() => {});
      return state.job(job).failing;
    },
    set: (job, streak) =>
      state.update((data) => {
        const { failing: _previous, ...rest } = data.jobs[job] ?? {};
        data.jobs[job] = streak ? { ...rest, failing: streak } : rest;
      }),
  };
}

/** For a one-off command (`countd run`), which must not write the daemon's state: every failure is reported. */
export function memoryStreaks(): StreakStore {
  const streaks = new Map<string, FailingStreak>();
  return {
    get: async (job) => streaks.get(job),
    set: async (job, streak) => {
      if (streak) streaks.set(job, streak);
      else streaks.delete(job);
    },
  };
}

export type FailureReport =
  /** The streak's first failure: reported as it is. */
  | { kind: "first" }
  /** A report a repeat interval after the last one, saying how long and how often. */
  | { kind: "still"; streak: FailingStreak }
  /** Within the interval: not reported. */
  | { kind: "quiet" };

/**
 * What a failure finishing at `at` sends to on_failure, and the streak after it: the first
 * failure, then at most one "still failing" per `repeatMs` after the last report.
 */
export function failed(streak: FailingStreak | undefined, at: Date, repeatMs: number): { report: FailureReport; next: FailingStreak } {
  const now = at.toISOString();
  if (!streak) return { report: { kind: "first" }, next: { since: now, failures: 1, reportedAt: now, unreported: 0 } };
  const failures = streak.failures + 1;
  if (at.getTime() - Date.parse(streak.reportedAt) >= repeatMs) {
    const reported = { ...streak, failures };
    return { report: { kind: "still", streak: reported }, next: { ...streak, failures, reportedAt: now, unreported: 0 } };
  }
  return { report: { kind: "quiet" }, next: { ...streak, failures, unreported: streak.unreported + 1 } };
}
