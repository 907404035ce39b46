import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import { JOB_NAME } from "../jobs/schema.js";
import type { Logger } from "../log.js";
import { HEARTBEAT_JOB, RUN_REASONS, RUN_STATUSES, type RunRecord } from "./run-record.js";
import { writeFileDurably } from "./durable.js";
import { appendJsonLines } from "./jsonl.js";
import { count, fit, isoTime as time, quarantine, type Misfit } from "./quarantine.js";

/** Runs kept per job; older ones drop off, so a job's history stays small however long countd runs. */
export const RUNS_KEPT_PER_JOB = 200;

const SUFFIX = ".jsonl";

/**
 * Names with a history file: job names, and the heartbeat's `@heartbeat`, whose file
 * `@heartbeat.jsonl` no job's can be. Both are plain file names, so the file stays in its folder.
 */
export function hasHistory(name: string): boolean {
  return JOB_NAME.test(name) || name === HEARTBEAT_JOB;
}

/** Records written before cache writes were counted have none. */
export const usageShape = z.looseObject({
  inputTokens: count,
  outputTokens: count,
  cachedInputTokens: count,
  cacheWriteTokens: count.default(0),
  estimatedTokens: count.optional(),
});

/** A run record as saved; fields a newer countd added are kept. */
export const runRecordShape = z.looseObject({
  id: z.string().min(1),
  job: z.string().refine(hasHistory, "expected a job name"),
  reason: z.enum(RUN_REASONS),
  scheduledAt: time,
  startedAt: time,
  finishedAt: time.optional(),
  status: z.enum(RUN_STATUSES),
  iterations: count,
  toolCalls: count,
  usage: usageShape,
  cost: z.number().nonnegative().nullable().optional(),
  model: z.string().optional(),
  resultExcerpt: z.string().optional(),
  error: z.string().optional(),
  sessionId: z.string(),
  node: z.string().optional(),
  attempt: z.number().int().positive().optional(),
  files: z.array(z.string()).optional(),
  moreFiles: count.optional(),
  notDelivered: z.string().optional(),
}) satisfies z.ZodType<RunRecord>;

/**
 * Where a state store keeps its runs: the files below (RunHistory), or Redis when several daemons
 * share one history (a shared backend's). Callers serialise the saves of one job.
 */
export interface RunHistoryStore {
  /** The newest RUNS_KEPT_PER_JOB runs of `job`, oldest first. */
  runs(job: string): Promise<RunRecord[]>;
  /** Ids of the job's runs this process has saved or read. */
  loadedIds(job: string): Iterable<string>;
  /** Jobs with recorded runs. */
  jobs(): Promise<string[]>;
  /** Adds runs of `job`, or replaces the records with their ids (the last save wins), keeping the newest RUNS_KEPT_PER_JOB. */
  save(job: string, runs: readonly RunRecord[]): Promise<void>;
}

interface JobRuns {
  /** By id, oldest first (a Map keeps insertion order; saving an id again keeps its place). */
  runs: Map<string, RunRecord>;
  /** Lines in the file, the superseded ones included: what decides a rewrite. */
  lines: number;
  /** Lines read that are no run record of this job: moved to the quarantine file by the next rewrite. */
  misfits: Misfit[];
}

/**
 * Each job's runs in `<dir>/<job>.jsonl`, one line per save; the last line for an id wins. An
 * append costs the same however long the history is. A file is rewritten with only the kept runs
 * once it holds more than twice as many lines, so a rewrite comes at most once per
 * RUNS_KEPT_PER_JOB saves. A job's file is read on first use, not at start-up.
 *
 * A line that is no run record of the file's job (cut short by a crash, edited by hand) is logged
 * and skipped when read, and stays in the file until the next rewrite moves it to the quarantine
 * file: only the daemon rewrites, and commands reading beside it must not replace a file it appends to.
 */
export class RunHistory implements RunHistoryStore {
  private readonly loaded = new Map<string, JobRuns>();
  private readonly loading = new Map<string, Promise<JobRuns>>();

  /**
   * `stateDir`: where the quarantine file is; `log`: where skipped lines and files are reported,
   * the state store's child logger (the history is part of that store).
   */
  constructor(
    private readonly dir: string,
    private readonly opts: { stateDir: string; log?: Logger },
  ) {}

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
    const jobs: string[] = [];
    for (const name of names.filter((file) => file.endsWith(SUFFIX))) {
      const job = name.slice(0, -SUFFIX.length);
      if (hasHistory(job)) jobs.push(job);
      else this.opts.log?.warn({ file: join(this.dir, name) }, "run history file is not named after a job; skipped");
    }
    return jobs;
  }

  /**
   * Appends runs of `job` in one write. Callers serialise saves of one job (KeyedQueue): an
   * append must not land in a file being replaced, nor race another append's end-of-line check.
   * A run's final record is synced before this resolves, so a power cut cannot take back how a
   * run ended once countd said so. A `running` record is not, since after a crash markInterrupted
   * finishes the run from state.json's index whether or not that record made it to disk; but one
   * that creates the file is, with its folder, so that the final record's sync covers the file's name.
   */
  async save(job: string, runs: readonly RunRecord[]): Promise<void> {
    const history = await this.load(job);
    await appendJsonLines(this.file(job), [...runs], { sync: runs.some((run) => run.status !== "running") ? "always" : "if new" });
    for (const run of runs) keep(history.runs, run);
    history.lines += runs.length;
    if (history.lines > 2 * RUNS_KEPT_PER_JOB) await this.rewrite(job, history);
  }

  private file(job: string): string {
    if (!hasHistory(job)) {
      throw new Error(`"${job}" is not a job name (${JOB_NAME.source}, or ${HEARTBEAT_JOB}); run history files are named after jobs`);
    }
    return join(this.dir, job + SUFFIX);
  }

  private load(job: string): Promise<JobRuns> {
    const history = this.loaded.get(job);
    if (history) return Promise.resolve(history);
    let loading = this.loading.get(job);
    if (!loading) {
      loading = this.read(job).then((read) => {
        this.loaded.set(job, read);
        return read;
      });
      const forget = () => this.loading.delete(job);
      loading.then(forget, forget);
      this.loading.set(job, loading);
    }
    return loading;
  }

  private async read(job: string): Promise<JobRuns> {
    const file = this.file(job);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { runs: new Map(), lines: 0, misfits: [] };
      throw new Error(`cannot read the run history file ${file}: ${(err as Error).message}`, { cause: err });
    }
    const runs = new Map<string, RunRecord>();
    const misfits: Misfit[] = [];
    let lines = 0;
    for (const [index, line] of text.split("\n").entries()) {
      if (line.trim() === "") continue;
      lines++;
      const where = `line ${index + 1}`;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        misfits.push({ file, where, problem: "is not JSON (cut short by a crash, or edited by hand)", value: line });
        continue;
      }
      const run = fit(runRecordShape, value, file, where, misfits);
      if (run === undefined) continue;
      if (run.job === job) keep(runs, run);
      else misfits.push({ file, where, problem: `is a run of "${run.job}", not of "${job}"`, value: run });
    }
    for (const misfit of misfits) {
      this.opts.log?.warn({ file, where: misfit.where, problem: misfit.problem }, "run history line cannot be used; skipped");
    }
    return { runs, lines, misfits };
  }

  /**
   * Written durably (writeFileDurably): a crash or a power cut leaves the old file or the new
   * one, never half of one, and the kept runs' synced records stay synced. The lines that did not
   * fit go to the quarantine file first, so no line is ever only dropped.
   */
  private async rewrite(job: string, history: JobRuns): Promise<void> {
    await quarantine(this.opts.stateDir, history.misfits, this.opts.log);
    history.misfits = [];
    await writeFileDurably(this.file(job), [...history.runs.values()].map((run) => JSON.stringify(run) + "\n").join(""));
    history.lines = history.runs.size;
  }
}

/** The same steps on save and on read, so a reopened history equals the one in memory. */
function keep(runs: Map<string, RunRecord>, run: RunRecord): void {
  runs.set(run.id, run);
  for (const id of runs.keys()) {
    if (runs.size <= RUNS_KEPT_PER_JOB) break;
    runs.delete(id);
  }
}
