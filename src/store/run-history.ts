import { readdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { JOB_NAME } from "../jobs/schema.js";
import type { RunRecord } from "../runner/types.js";
import { appendJsonLines, readJsonLines } from "../sessions/jsonl.js";

/** Runs kept per job; older ones drop off, so a job's history stays small however long countd runs. */
export const RUNS_KEPT_PER_JOB = 200;

const SUFFIX = ".jsonl";

interface JobRuns {
  /** By id, oldest first (a Map keeps insertion order; saving an id again keeps its place). */
  runs: Map<string, RunRecord>;
  /** Lines in the file, the superseded ones included: what decides a rewrite. */
  lines: number;
}

/**
 * Each job's runs in `<dir>/<job>.jsonl`, one line per save; the last line for an id wins. An
 * append costs the same however long the history is. A file is rewritten with only the kept runs
 * once it holds more than twice as many lines, so a rewrite comes at most once per
 * RUNS_KEPT_PER_JOB saves. A job's file is read on first use, not at start-up.
 */
export class RunHistory {
  private readonly loaded = new Map<string, JobRuns>();
  private readonly loading = new Map<string, Promise<JobRuns>>();

  constructor(private readonly dir: string) {}

  /** The newest RUNS_KEPT_PER_JOB runs of `job`, oldest first. */
  async runs(job: string): Promise<RunRecord[]> {
    return [...(await this.load(job)).runs.values()];
  }

  /** Ids of the job's runs in memory: none until its file was read, which saving does first. */
  loadedIds(job: string): Iterable<string> {
    return this.loaded.get(job)?.runs.keys() ?? [];
  }

  /** Jobs with a history file. */
  async jobs(): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
    return names.filter((name) => name.endsWith(SUFFIX)).map((name) => name.slice(0, -SUFFIX.length));
  }

  /**
   * Appends runs of `job` in one write. Callers serialise saves of one job (KeyedQueue): an
   * append must not land in a file being replaced, nor race another append's end-of-line check.
   */
  async save(job: string, runs: readonly RunRecord[]): Promise<void> {
    const history = await this.load(job);
    await appendJsonLines(this.file(job), [...runs]);
    for (const run of runs) keep(history.runs, run);
    history.lines += runs.length;
    if (history.lines > 2 * RUNS_KEPT_PER_JOB) await this.rewrite(job, history);
  }

  private file(job: string): string {
    if (!JOB_NAME.test(job)) {
      throw new Error(`"${job}" is not a job name (${JOB_NAME.source}); run history files are named after jobs`);
    }
    return join(this.dir, job + SUFFIX);
  }

  private load(job: string): Promise<JobRuns> {
    const history = this.loaded.get(job);
    if (history) return Promise.resolve(history);
    let loading = this.loading.get(job);
    if (!loading) {
      loading = readJobRuns(this.file(job)).then((read) => {
        this.loaded.set(job, read);
        return read;
      });
      const forget = () => this.loading.delete(job);
      loading.then(forget, forget);
      this.loading.set(job, loading);
    }
    return loading;
  }

  /** Temp file and rename: a crash leaves the old file or the new one, never half of one. */
  private async rewrite(job: string, history: JobRuns): Promise<void> {
    const file = this.file(job);
    const temp = `${file}.tmp`;
    await writeFile(temp, [...history.runs.values()].map((run) => JSON.stringify(run) + "\n").join(""));
    await rename(temp, file);
    history.lines = history.runs.size;
  }
}

async function readJobRuns(file: string): Promise<JobRuns> {
  const lines = await readJsonLines(file);
  const runs = new Map<string, RunRecord>();
  for (const line of lines) if (isRunRecord(line)) keep(runs, line);
  return { runs, lines: lines.length };
}

/** The same steps on save and on read, so a reopened history equals the one in memory. */
function keep(runs: Map<string, RunRecord>, run: RunRecord): void {
  runs.set(run.id, run);
  for (const id of runs.keys()) {
    if (runs.size <= RUNS_KEPT_PER_JOB) break;
    runs.delete(id);
  }
}

function isRunRecord(value: unknown): value is RunRecord {
  return typeof value === "object" && value !== null && typeof (value as { id?: unknown }).id === "string";
}
