import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Low } from "lowdb";
import { JSONFile } from "lowdb/node";
import type { RunRecord } from "../runner/types.js";

/** Runs kept per job; older ones drop off, so the state file stays small however long countd runs. */
export const RUNS_KEPT_PER_JOB = 200;

export interface JobState {
  /** ISO 8601: the slot the job last fired for (catch-up counts missed slots from here). */
  lastScheduledAt?: string;
  /** A one-shot `at` job that fired never fires again, also after a restart. */
  done?: boolean;
}

export interface HeartbeatState {
  /** ISO 8601 times of delivered check-ins, for the daily cap. */
  delivered: Array<{ at: string; hash: string }>;
  /** The last `countd ask` exchange or message delivered to the heartbeat's recipient. */
  lastContactAt?: string;
}

export interface StateData {
  jobs: Record<string, JobState>;
  runs: Record<string, RunRecord[]>;
  heartbeat: HeartbeatState;
}

const empty = (): StateData => ({ jobs: {}, runs: {}, heartbeat: { delivered: [] } });

/**
 * The daemon's small mutable state, in one JSON file written atomically (lowdb). Constructed
 * with JSONFile directly: lowdb's presets switch to memory under NODE_ENV=test, and here
 * persistence is the point.
 */
export class StateStore {
  private constructor(private readonly db: Low<StateData>) {}

  static async open(stateDir: string): Promise<StateStore> {
    await mkdir(stateDir, { recursive: true });
    const file = join(stateDir, "state.json");
    const db = new Low(new JSONFile<StateData>(file), empty());
    try {
      await db.read();
    } catch (err) {
      // JSON.parse's own message names no file.
      if (!(err instanceof SyntaxError)) throw err;
      throw new Error(`the state file ${file} is not valid JSON (${err.message}); repair it, or move it away to start with empty state`);
    }
    db.data = { ...empty(), ...db.data };
    return new StateStore(db);
  }

  get data(): Readonly<StateData> {
    return this.db.data;
  }

  /** Changes and saves; lowdb writes one file at a time, so concurrent updates do not interleave. */
  async update(change: (data: StateData) => void): Promise<void> {
    change(this.db.data);
    await this.db.write();
  }

  job(name: string): JobState {
    return this.db.data.jobs[name] ?? {};
  }

  runs(job: string): readonly RunRecord[] {
    return this.db.data.runs[job] ?? [];
  }

  /** Adds a run or replaces the record with the same id, keeping the newest RUNS_KEPT_PER_JOB. */
  async saveRun(run: RunRecord): Promise<void> {
    await this.update((data) => {
      const runs = (data.runs[run.job] ??= []);
      const index = runs.findIndex((r) => r.id === run.id);
      if (index >= 0) runs[index] = run;
      else runs.push(run);
      if (runs.length > RUNS_KEPT_PER_JOB) runs.splice(0, runs.length - RUNS_KEPT_PER_JOB);
    });
  }

  /** At start-up: a run still `running` was cut short by a crash. Returns how many were. */
  async markInterrupted(now: Date): Promise<number> {
    let count = 0;
    await this.update((data) => {
      for (const run of Object.values(data.runs).flat()) {
        if (run.status !== "running") continue;
        run.status = "interrupted";
        run.finishedAt = now.toISOString();
        run.error = "countd stopped while this run was in progress";
        count++;
      }
    });
    return count;
  }
}
