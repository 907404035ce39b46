import { silentLogger, type Logger } from "../log.js";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { errorText } from "../text.js";
import {
  displayPath,
  isJobFileName,
  listJobFiles,
  readJobFiles,
  readJobFolder,
  selectJobs,
  type JobContext,
  type JobFileResult,
} from "./load.js";
import { FolderWatch } from "./folder-watch.js";
import { fileProblems, type FileProblems } from "./not-armed.js";
import type { Job } from "./types.js";

export interface JobRegistryOptions {
  /** The jobs folder. */
  dir: string;
  ctx: JobContext;
  /** Called with every job after each change that altered the list (not after load()). */
  onChange?: (jobs: Job[]) => void;
  /** Called with the files that have problems or give no job whenever that list changed (not after load()). */
  onProblems?: (files: FileProblems[]) => void;
  /** The jobs countd.yaml defines (the heartbeat's), asked again at each reload: they are listed, fired and changed like the files' jobs. */
  builtIn?: () => Job[];
  /** Where a full read of the folder keeps what it made of each file (jobs/file-cache.ts). */
  stateDir?: string;
  log?: Logger;
}

/** A line about the folder's current state, logged when it first appears. */
interface Line {
  level: "error" | "warn";
  msg: string;
  fields: Record<string, string>;
}

const keyOf = (line: Line) => `${line.msg}\0${JSON.stringify(line.fields)}`;

/**
 * The jobs of a folder, kept current while the daemon runs: a file that turns invalid keeps its
 * last good job, a removed file takes its job away. Changes are applied one batch at a time.
 */
export class JobRegistry {
  private readonly dir: string;
  private ctx: JobContext;
  private readonly onChange: JobRegistryOptions["onChange"];
  private readonly onProblems: JobRegistryOptions["onProblems"];
  private readonly builtIn: () => Job[];
  private readonly stateDir: string | undefined;
  private builtIns: Job[] = [];
  private readonly log: Logger;
  /** By file, so a change re-reads one file and the rest stay as loaded. */
  private results = new Map<string, JobFileResult>();
  private jobs: Job[] = [];
  private byName = new Map<string, Job>();
  private troubled: FileProblems[] = [];
  /** Keys of the lines logged for the current state: a problem that persists is logged once, not on every change. */
  private reported = new Set<string>();
  /** Problems with the folder itself (missing, unreadable), from the last full scan. */
  private dirProblems: string[] = [];
  private watcher: FolderWatch | undefined;
  /** Files changed or removed since the last batch was applied; the latest event per file counts. */
  private pending = new Map<string, "changed" | "removed">();
  private queue: Promise<void> = Promise.resolve();

  constructor(opts: JobRegistryOptions) {
    this.dir = path.resolve(opts.dir);
    this.ctx = opts.ctx;
    this.onChange = opts.onChange;
    this.onProblems = opts.onProblems;
    this.builtIn = opts.builtIn ?? (() => []);
    this.stateDir = opts.stateDir;
    this.log = (opts.log ?? silentLogger).child({ component: "jobs" });
  }

  /**
   * Reads every job file, logging its problems and warnings unless `log` is false (a command that
   * reports only the file it was asked about). `unset` lists the unset variables the jobs refer
   * to, which a starting daemon refuses.
   */
  async load({ log = true }: { log?: boolean } = {}): Promise<{ problems: string[]; warnings: string[]; unset: string[] }> {
    const problems = await this.rescan(log, false);
    const results = [...this.results.values()];
    return { problems, warnings: results.flatMap((result) => result.warnings), unset: results.flatMap((result) => result.unset) };
  }

  /**
   * Watches the folder; resolves once the watch is set up, so a change made after that is seen.
   * The folder may be created later, or deleted and made again (a checkout), and is still followed.
   */
  async watch(): Promise<void> {
    if (this.watcher) return;
    this.watcher = new FolderWatch({
      dir: this.dir,
      accept: isJobFileName,
      onFile: (file, event) => this.enqueue(file, event),
      onFolder: () => void this.reload(),
      onError: (err) => this.log.error({ dir: displayPath(this.dir), error: errorText(err) }, "watching job files failed"),
    });
    this.watcher.start();
  }

  /** Re-reads every job file (SIGHUP), with a new context when the configuration changed. */
  reload(ctx?: JobContext): Promise<void> {
    return this.serially(async () => {
      if (ctx) this.ctx = ctx;
      this.pending.clear();
      await this.rescan(true, true);
    });
  }

  get(name: string): Job | undefined {
    return this.byName.get(name);
  }

  all(): Job[] {
    return [...this.jobs];
  }

  /**
   * Every job file as last read, with its problems now: a file whose job still runs its last good
   * version, and one that loaded no job, show their problems where the job is looked for.
   */
  files(): Array<{ file: string; job?: Job; problems: string[] }> {
    const byFile = new Map(this.jobs.map((job) => [job.file, job]));
    const unarmed = new Map(this.notArmed().map((file) => [file.file, file.problems]));
    const fromFiles = [...this.results.values()].map((result) => ({
      file: result.file,
      job: byFile.get(result.file),
      problems: unarmed.get(result.file) ?? result.problems,
    }));
    return [...fromFiles, ...this.builtIns.map((job) => ({ file: job.file, job, problems: [] }))];
  }

  /** The files that give no job, with why. */
  notArmed(): FileProblems[] {
    return this.troubled.filter((file) => !file.armed);
  }

  /** The files that have problems or give no job. */
  problemFiles(): FileProblems[] {
    return [...this.troubled];
  }

  /** Problems with the folder itself (missing, unreadable). */
  folderProblems(): string[] {
    return [...this.dirProblems];
  }

  async close(): Promise<void> {
    this.watcher?.close();
    this.watcher = undefined;
    await this.queue;
  }

  private enqueue(file: string, event: "changed" | "removed"): void {
    this.pending.set(path.resolve(file), event);
    void this.serially(() => this.applyPending());
  }

  private serially(task: () => Promise<unknown>): Promise<void> {
    const run = this.queue.then(task).then(
      () => undefined,
      (err: unknown) => this.log.error({ dir: displayPath(this.dir), error: errorText(err) }, "reloading jobs failed"),
    );
    this.queue = run;
    return run;
  }

  /** Re-reads only the files named by events since the last batch; a file that is gone drops out. */
  private async applyPending(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending];
    this.pending.clear();
    const next = new Map(this.results);
    for (const [file] of batch.filter(([, event]) => event === "removed")) next.delete(file);
    const changed = batch.filter(([, event]) => event === "changed").map(([file]) => file);
    for (const result of await readJobFiles(changed, this.ctx)) next.set(result.file, result);
    this.apply(next, true, true);
  }

  private async rescan(log: boolean, notify = log): Promise<string[]> {
    const listed = await listJobFiles(this.dir);
    const files = "files" in listed ? listed.files : [];
    // Only a full read goes through the cache: a batch of changes is a few files, and a start-up is when it pays.
    const { results, unsaved } = await readJobFolder(files, this.ctx, this.stateDir);
    if (unsaved) this.log.warn({ error: errorText(unsaved) }, "job file cache not written: the next start parses every file");
    this.dirProblems = "problem" in listed ? [listed.problem] : [];
    return this.apply(new Map(results.map((result) => [result.file, result])), log, notify);
  }

  /**
   * Makes `results` current and returns the problems of the new state. With `log`, new problems
   * are logged, and so is a change of the job list; with `notify`, that change is passed to
   * onChange and a change of the files with problems or no job to onProblems.
   */
  private apply(results: Map<string, JobFileResult>, log: boolean, notify: boolean): string[] {
    const lastGood = new Map(this.jobs.map((job) => [job.file, job]));
    const ordered = [...results.keys()].sort().map((file) => results.get(file)!);
    const selected = selectJobs(ordered, lastGood);
    const { kept } = selected;
    const builtIns = this.builtIn();
    const jobs = [...selected.jobs, ...builtIns];
    const problems = [...this.dirProblems, ...selected.problems];
    const troubled = fileProblems(ordered, new Map(selected.jobs.map((job) => [job.file, job.name])), selected.problems);
    const unarmed = troubled.filter((file) => !file.armed);
    const ofUnarmed = new Set(unarmed.flatMap((file) => file.problems));

    const lines: Line[] = [
      ...unarmed.flatMap((file) =>
        file.problems.map((problem): Line => ({
          level: "error",
          fields: { file: displayPath(file.file), job: file.name, problem },
          msg: "job not armed: its file has problems",
        })),
      ),
      ...problems
        .filter((problem) => !ofUnarmed.has(problem))
        .map((problem): Line => ({ level: "error", fields: { problem }, msg: "problem in the jobs folder" })),
      ...ordered
        .flatMap((result) => result.warnings)
        .map((warning): Line => ({ level: "warn", fields: { warning }, msg: "warning in the jobs folder" })),
      ...kept.map((job): Line => ({
        level: "warn",
        fields: { file: displayPath(job.file), job: job.name },
        msg: "job keeps running its last good version until the file is fixed",
      })),
    ];
    if (log) for (const line of lines) if (!this.reported.has(keyOf(line))) this.log[line.level](line.fields, line.msg);
    this.reported = new Set(lines.map(keyOf));
    // Its problems were logged; without this line the log would never say they are gone.
    const fixed = jobs.filter(
      (job) => (this.results.get(job.file)?.problems.length ?? 0) > 0 && results.get(job.file)?.problems.length === 0,
    );
    if (log) {
      for (const job of fixed)
        this.log.info({ file: displayPath(job.file), job: job.name }, "job file valid again; the job runs as the file now says");
    }

    const before = this.jobs;
    const troubledBefore = this.troubled;
    this.results = results;
    this.jobs = jobs;
    this.builtIns = builtIns;
    this.byName = new Map(jobs.map((job) => [job.name, job]));
    this.troubled = troubled;
    if (log && notify && !isDeepStrictEqual(before, jobs)) {
      const change = describeChange(before, jobs);
      this.log.info(change.fields, change.msg);
      this.onChange?.(this.all());
    }
    if (notify && !isDeepStrictEqual(troubledBefore, troubled)) this.onProblems?.(this.problemFiles());
    return problems;
  }
}

function describeChange(before: readonly Job[], after: readonly Job[]): { msg: string; fields: Record<string, unknown> } {
  const old = new Map(before.map((job) => [job.name, job]));
  const now = new Map(after.map((job) => [job.name, job]));
  const added = after.filter((job) => !old.has(job.name)).map((job) => job.name);
  const removed = before.filter((job) => !now.has(job.name)).map((job) => job.name);
  const changed = after.filter((job) => old.has(job.name) && !isDeepStrictEqual(old.get(job.name), job)).map((job) => job.name);
  const fields = {
    ...(added.length > 0 ? { added } : {}),
    ...(changed.length > 0 ? { changed } : {}),
    ...(removed.length > 0 ? { removed } : {}),
    loaded: after.length,
  };
  return { msg: added.length + changed.length + removed.length > 0 ? "job list changed" : "job list reordered", fields };
}
