import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunRecord } from "../store/run-record.js";
import { REHEARSALS_DIR, SUMMARY_FILE, type RehearsalSummary } from "./session.js";

/**
 * The rehearsals, replays and forks kept in the state directory, newest first. Their runs are in
 * no job's history: `countd show` and the console find them here, by the summary each folder keeps.
 * A folder without a readable summary (a rehearsal still running, or cut short) is left out.
 */
export async function rehearsals(state: string): Promise<RehearsalSummary[]> {
  let names: string[];
  try {
    names = await readdir(join(state, REHEARSALS_DIR));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const summaries = await Promise.all(
    names
      .sort()
      .reverse()
      .map(async (name) => {
        try {
          return JSON.parse(await readFile(join(state, REHEARSALS_DIR, name, SUMMARY_FILE), "utf8")) as RehearsalSummary;
        } catch {
          return undefined;
        }
      }),
  );
  // Ids share a second: the runs' starts, to the millisecond, order them.
  return summaries
    .filter((summary): summary is RehearsalSummary => summary !== undefined)
    .sort((a, b) => b.run.startedAt.localeCompare(a.run.startedAt) || b.id.localeCompare(a.id));
}

/** The records of rehearsal runs with this id (of `job` alone, when given). */
export async function rehearsalRuns(state: string, runId: string, job?: string): Promise<RunRecord[]> {
  return (await rehearsals(state))
    .map((summary) => summary.run)
    .filter((run) => run.id === runId && (job === undefined || run.job === job));
}
