import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Low } from "lowdb";
import * as z from "zod";
import { silentLogger, type Logger } from "../log.js";
import { errorText } from "../text.js";
import { HEARTBEAT_JOB, type RunRecord } from "./run-record.js";
import { KeyedQueue } from "./keyed-queue.js";
import { count, fit, fitEach, isoTime as time, isPlainObject, kind, quarantine, readJsonFile, type Misfit } from "./quarantine.js";
import { hasHistory, RunHistory, type RunHistoryStore } from "./run-history.js";
import { inRecreatedDir } from "./writable-dir.js";
import { DurableJSONFile } from "./durable.js";

export { RUNS_KEPT_PER_JOB } from "./run-history.js";

export interface JobState {
  /** ISO 8601: the slot the job last fired for (catch-up counts missed slots from here). */
  lastScheduledAt?: string;
  /** A one-shot `at` job that fired never fires again, also after a restart. */
  done?: boolean;
  /** The job's failures since its last success, as reported to on_failure (delivery/alerts.ts). */
  failing?: FailingStreak;
  /** ISO 8601: when the job was paused; its fires, but for those asked for by hand, are recorded skipped. */
  pausedAt?: string;
  /** Paths its watch fires carried while it was paused, run as one batch once it is resumed (runner/held-files.ts). */
  held?: HeldFiles;
  /** `@heartbeat`'s check-ins (triggers/check-ins.ts). */
  checkIns?: CheckInState;
  /** With `deliver_when: changed`, the answer the job last queued for delivery (delivery/changed.ts). */
  lastDelivered?: LastDelivered;
}

export interface LastDelivered {
  /** SHA-256 in hex of what was compared: the normalised answer, or its canonical JSON. */
  hash: string;
  /** The run whose answer it was. */
  run: string;
  /** ISO 8601: when it was queued. */
  at: string;
}

export interface HeldFiles {
  files: string[];
  /** Paths beyond the bound, counted and not kept. */
  overflow: number;
  /** Where daemons share a backend: the node whose watcher saw them, the one where the files are and which runs them. */
  node?: string;
}

export interface FailingStreak {
  /** ISO 8601: when the first failure of the streak finished. */
  since: string;
  /** Failed runs in the streak. */
  failures: number;
  /** ISO 8601: when the last report went to on_failure. */
  reportedAt: string;
  /** Failed runs since that report, not reported. */
  unreported: number;
}

/** What the heartbeat's rules read: its daily cap, its dedupe and its idle threshold. */
export interface CheckInState {
  /** ISO 8601 times of delivered check-ins, for the daily cap. */
  delivered: Array<{ at: string; hash: string }>;
  /** The last `countd ask` exchange or message delivered to the heartbeat's recipient. */
  lastContactAt?: string;
}

/** The heartbeat's check-ins, kept in the job state of `@heartbeat`: none recorded yet, an empty list. */
export function checkInsOf(data: Pick<SharedState, "jobs">): CheckInState {
  return data.jobs[HEARTBEAT_JOB]?.checkIns ?? { delivered: [] };
}

/** The same, to change within an update. */
export function checkInsToChange(data: SharedState): CheckInState {
  return ((data.jobs[HEARTBEAT_JOB] ??= {}).checkIns ??= { delivered: [] });
}

export interface RunningRun {
  job: string;
  id: string;
}

export interface StateData {
  jobs: Record<string, JobState>;
  /** Runs in progress by `<job>/<id>`: after a crash, the only runs markInterrupted has to look at. */
  running: Record<string, RunningRun>;
  /** ISO 8601: when every job was paused at once (the kill switch), whatever each job's own pausedAt. */
  pausedAllAt?: string;
}

/**
 * What daemons sharing a backend share of the state: job state (catch-up, one-shots, failing streaks,
 * pauses, the heartbeat's check-ins) and the kill switch. The running index stays each daemon's own.
 */
export type SharedState = Pick<StateData, "jobs" | "pausedAllAt">;

/**
 * Where the shared state is kept: state.json for a daemon alone, or a backend daemons share.
 * Reads are synchronous, from a copy kept current; a decision that must see another daemon's
 * latest change (a shared fire, a failing streak) calls refresh() first.
 */
export interface SharedStateStore {
  /** The state as last read or written here. */
  readonly data: Readonly<SharedState>;
  /** Changes and saves in one step: concurrent changes, from this daemon or another, are not lost. */
  update(change: (data: SharedState) => void): Promise<void>;
  /** Brings `data` up to what is saved now. */
  refresh(): Promise<void>;
}

/** A shared state kept outside the state directory, which takes over what state.json held of it. */
export interface AdoptingStateStore extends SharedStateStore {
  /** Merges in what state.json held before this store kept it; says how many jobs' states it took, and which were paused. */
  adopt(held: SharedState): Promise<{ jobs: number; paused: string[] }>;
}

const empty = (): StateData => ({ jobs: {}, running: {} });

const runKey = (run: RunningRun): string => `${run.job}/${run.id}`;

const failingShape = z.looseObject({ since: time, failures: count, reportedAt: time, unreported: count });
const deliveredShape = z.looseObject({ at: time, hash: z.string() });
const lastDeliveredShape = z.looseObject({ hash: z.string(), run: z.string(), at: time });
export const jobStateShape = z.looseObject({
  lastScheduledAt: time.optional(),
  done: z.boolean().optional(),
  failing: failingShape.optional(),
  pausedAt: time.optional(),
  held: z.looseObject({ files: z.array(z.string()), overflow: count, node: z.string().optional() }).optional(),
  checkIns: z.looseObject({ delivered: z.array(deliveredShape), lastContactAt: time.optional() }).optional(),
  lastDelivered: lastDeliveredShape.optional(),
}) satisfies z.ZodType<JobState>;
const runningShape = z.looseObject({ job: z.string().refine(hasHistory, "expected a job name"), id: z.string().min(1) });

/**
 * state.json's content as countd can use it, checked piece by piece: a job's state, a delivered
 * check-in, an entry of the running index. What does not fit is returned as a
 * misfit instead, down to the whole file when it is no object: nothing is merged that was not
 * written as state (a string spread into an object would become keys "0", "1", …).
 */
function fitState(read: { value: unknown } | undefined, file: string): { data: StateData; misfits: Misfit[] } {
  const data: StateData = empty();
  const misfits: Misfit[] = [];
  if (read === undefined) return { data, misfits };
  const raw = read.value;
  if (!isPlainObject(raw)) {
    misfits.push({ file, where: "the whole file", problem: `does not fit: expected an object of state, got ${kind(raw)}`, value: raw });
    return { data, misfits };
  }
  for (const [key, value] of Object.entries(raw)) {
    switch (key) {
      case "jobs":
        data.jobs = fitJobs(value, file, misfits);
        break;
      case "running":
        for (const [runKeyText, run] of Object.entries(fitEach(runningShape, value, file, key, misfits))) {
          if (runKeyText === runKey(run)) data.running[runKeyText] = { job: run.job, id: run.id };
          else misfits.push({ file, where: `running.${runKeyText}`, problem: `does not fit: the key is not "${runKey(run)}"`, value: run });
        }
        break;
      case "pausedAllAt": {
        const at = fit(time, value, file, key, misfits);
        if (at !== undefined) data.pausedAllAt = at;
        break;
      }
      default:
        misfits.push({ file, where: key, problem: "is not a part of countd's state", value });
    }
  }
  return { data, misfits };
}

/**
 * Each job's state, and the heartbeat's check-ins one by one: a check-in spoiled by hand is moved
 * aside alone, and the others still count toward the daily cap and the dedupe.
 */
function fitJobs(value: unknown, file: string, misfits: Misfit[]): Record<string, JobState> {
  if (!isPlainObject(value)) return fitEach(jobStateShape, value, file, "jobs", misfits);
  const jobs: Record<string, JobState> = {};
  for (const [name, raw] of Object.entries(value)) {
    const where = `jobs.${name}`;
    const { checkIns, ...rest }: Record<string, unknown> = isPlainObject(raw) ? raw : {};
    const job = fit(jobStateShape, isPlainObject(raw) ? rest : raw, file, where, misfits);
    if (job === undefined) continue;
    jobs[name] = checkIns === undefined ? job : { ...job, checkIns: fitCheckIns(checkIns, file, `${where}.checkIns`, misfits) };
  }
  return jobs;
}

function fitCheckIns(value: unknown, file: string, where: string, misfits: Misfit[]): CheckInState {
  const checkIns: CheckInState = { delivered: [] };
  if (!isPlainObject(value)) {
    misfits.push({ file, where, problem: `does not fit: expected an object, got ${kind(value)}`, value });
    return checkIns;
  }
  for (const [key, part] of Object.entries(value)) {
    const at = `${where}.${key}`;
    if (key === "delivered") {
      if (!Array.isArray(part))
        misfits.push({ file, where: at, problem: `does not fit: expected an array, got ${kind(part)}`, value: part });
      else checkIns.delivered = part.flatMap((item, i) => fit(deliveredShape, item, file, `${at}.${i}`, misfits) ?? []);
    } else if (key === "lastContactAt") {
      const contact = fit(time, part, file, at, misfits);
      if (contact !== undefined) checkIns.lastContactAt = contact;
    } else {
      misfits.push({ file, where: at, problem: "is not a part of countd's state", value: part });
    }
  }
  return checkIns;
}

/**
 * The daemon's state in the state directory: state.json (lowdb, written and synced through
 * DurableJSONFile, so a power cut leaves the old file or the new one) holds what stays small, job
 * state with the heartbeat's check-ins (where daemons share a backend, kept there instead:
 * SharedStateStore) and the runs in progress; run history is appended to runs/<job>.jsonl (RunHistory), so a saved run costs the
 * same however many runs came before. Not one of lowdb's
 * presets: they switch to memory under NODE_ENV=test, and here persistence is the point.
 */
export class StateStore {
  /** Saves of one job in call order: a run's end must not overtake its start. */
  private readonly saving = new KeyedQueue();
  /** state.json writes in flight, which close() waits for: a caller need not await an update. */
  private readonly writing = new Set<Promise<void>>();
  /** Runs handed to saveRun and not saved yet, by key, so knownRunIds sees them at once. */
  private readonly queued = new Map<string, RunningRun>();
  private readonly shared: SharedStateStore;

  private constructor(
    private readonly dir: string,
    private readonly db: Low<StateData>,
    private readonly history: RunHistoryStore,
    private readonly log: Logger,
    shared: SharedStateStore | undefined,
  ) {
    this.shared = shared ?? {
      get data() {
        return db.data;
      },
      update: (change) => this.write(change),
      refresh: async () => {},
    };
  }

  /**
   * `log`: where pieces moved aside and a state directory removed while countd runs (it is created
   * again) are reported. Pieces of state.json that do not fit are moved to the quarantine file
   * and the file is written without them; a file that is not JSON at all is refused. `history`:
   * where runs are kept instead of runs/ (a backend's that daemons share); `shared`: where job
   * state and pauses are kept instead of state.json (a shared backend's).
   */
  static async open(
    stateDir: string,
    opts: { log?: Logger; history?: RunHistoryStore; shared?: AdoptingStateStore } = {},
  ): Promise<StateStore> {
    const log = (opts.log ?? silentLogger).child({ component: "state" });
    await mkdir(stateDir, { recursive: true });
    const file = join(stateDir, "state.json");
    const read = await readJsonFile(file, "state file", "repair it, or move it away to start with empty state");
    const { data, misfits } = fitState(read, file);
    const state = new Low<StateData>(new DurableJSONFile(file), data);
    await quarantine(stateDir, misfits, log);
    if (misfits.length > 0) await state.write();
    const history = opts.history ?? new RunHistory(join(stateDir, "runs"), { stateDir, log });
    if (opts.shared) await handOver(state, opts.shared, log);
    return new StateStore(stateDir, state, history, log, opts.shared);
  }

  get data(): Readonly<StateData> {
    return { ...this.shared.data, running: this.db.data.running };
  }

  /** Changes and saves the shared state (state.json's, or a shared backend's). */
  update(change: (data: SharedState) => void): Promise<void> {
    return this.shared.update(change);
  }

  /** Brings the shared state up to what another daemon sharing the backend saved last; nothing to do alone. */
  refresh(): Promise<void> {
    return this.shared.refresh();
  }

  /** Changes and saves state.json; lowdb writes one file at a time, so concurrent updates do not interleave. */
  private async write(change: (data: StateData) => void): Promise<void> {
    change(this.db.data);
    const write = inRecreatedDir(this.dir, () => this.db.write(), this.log);
    this.writing.add(write);
    try {
      await write;
    } finally {
      this.writing.delete(write);
    }
  }

  job(name: string): JobState {
    return this.shared.data.jobs[name] ?? {};
  }

  /** True when the job is paused, on its own or with every job. */
  isPaused(job: string): boolean {
    return this.shared.data.pausedAllAt !== undefined || this.job(job).pausedAt !== undefined;
  }

  /** When every job was paused at once, if they are. */
  pausedAll(): string | undefined {
    return this.shared.data.pausedAllAt;
  }

  /** Pauses one job, or every job (null); what is already paused keeps the time it was paused first. */
  pause(job: string | null, at: Date = new Date()): Promise<void> {
    return this.update((data) => {
      if (job === null) data.pausedAllAt ??= at.toISOString();
      else (data.jobs[job] ??= {}).pausedAt ??= at.toISOString();
    });
  }

  /**
   * Resumes one job, or every job (null: the switch that paused them all and each job's own pause).
   * A job resumed while every job is paused loses only its own pause: it stays paused until the
   * switch is resumed too.
   */
  resume(job: string | null): Promise<void> {
    return this.update((data) => {
      if (job === null) delete data.pausedAllAt;
      for (const name of job === null ? Object.keys(data.jobs) : [job]) {
        const state = data.jobs[name];
        if (state?.pausedAt === undefined) continue;
        delete state.pausedAt;
        // A job that was only paused leaves no trace in state.json.
        if (Object.keys(state).length === 0) delete data.jobs[name];
      }
    });
  }

  /** The job's newest RUNS_KEPT_PER_JOB runs, oldest first; reads its file on first use. */
  runs(job: string): Promise<readonly RunRecord[]> {
    return this.history.runs(job);
  }

  /** Every job's runs: reads every history file, which suits a CLI command, not the daemon. */
  async allRuns(): Promise<RunRecord[]> {
    const all: RunRecord[] = [];
    // One file at a time: a thousand jobs read at once would run out of file descriptors.
    for (const job of await this.history.jobs()) all.push(...(await this.history.runs(job)));
    return all;
  }

  /**
   * Ids of the job's runs known without reading its file: those saved or read since opening and
   * those in progress. A run id begins with its start second, so one of an older run not read
   * could only repeat a new one if countd restarted within that second.
   */
  knownRunIds(job: string): string[] {
    const ids = new Set(this.history.loadedIds(job));
    for (const run of [...this.queued.values(), ...Object.values(this.db.data.running)]) if (run.job === job) ids.add(run.id);
    return [...ids];
  }

  /**
   * Adds a run or replaces the record with the same id (the last save wins), keeping the newest
   * RUNS_KEPT_PER_JOB of the job; resolves once the record is on disk. A run in progress is
   * indexed in state.json before its record is appended, and unindexed after its final record is:
   * a crash in between leaves an index entry markInterrupted drops, never a record `running` that
   * nothing will finish.
   */
  saveRun(run: RunRecord): Promise<void> {
    const key = runKey(run);
    const running = run.status === "running";
    this.queued.set(key, { job: run.job, id: run.id });
    const saved = this.saving
      .run(run.job, async () => {
        if (running && !(key in this.db.data.running)) await this.write((data) => (data.running[key] = { job: run.job, id: run.id }));
        await this.history.save(run.job, [run]);
      })
      .finally(() => this.queued.delete(key));
    if (!running) {
      // Not waited for, and a failure ignored: a stale entry only costs markInterrupted a look.
      const unindex = () => (key in this.db.data.running ? this.write((data) => delete data.running[key]) : undefined);
      this.saving.run(run.job, () => saved.then(unindex)).catch(() => {});
    }
    return saved;
  }

  /** Resolves once every save and update handed to the store so far is on disk, the unwaited ones included. */
  async close(): Promise<void> {
    await this.saving.idle();
    await Promise.allSettled([...this.writing]);
  }

  /** At start-up: a run still `running` was cut short by a crash. Returns those runs, now `interrupted`. */
  async markInterrupted(now: Date): Promise<RunRecord[]> {
    const entries = Object.entries(this.db.data.running);
    const marked: RunRecord[] = [];
    for (const [, { job, id }] of entries) {
      const run = (await this.history.runs(job)).find((r) => r.id === id);
      if (run?.status !== "running") continue;
      const error = "countd stopped while this run was in progress";
      const interrupted: RunRecord = { ...run, status: "interrupted", finishedAt: now.toISOString(), error };
      await this.saving.run(job, () => this.history.save(job, [interrupted]));
      marked.push(interrupted);
    }
    if (entries.length > 0) await this.write((data) => entries.forEach(([key]) => delete data.running[key]));
    return marked;
  }
}

/**
 * A state directory that was a daemon's alone before it shared a backend with others: what its
 * state.json held of the shared state goes to the shared store, once (then state.json keeps its
 * running index alone), so a job paused alone stays paused, a one-shot done does not fire again and
 * catch-up counts from the slot last fired. The shared store failing, state.json is left as it
 * was and handed over at the next start.
 */
async function handOver(db: Low<StateData>, shared: AdoptingStateStore, log: Logger): Promise<void> {
  const { jobs, pausedAllAt } = db.data;
  if (Object.keys(jobs).length === 0 && pausedAllAt === undefined) return;
  let carried: { jobs: number; paused: string[] };
  try {
    carried = await shared.adopt({ jobs, ...(pausedAllAt !== undefined ? { pausedAllAt } : {}) });
  } catch (err) {
    log.warn({ error: errorText(err) }, "could not hand state.json's job state over to the shared state; handed over at the next start");
    return;
  }
  db.data.jobs = {};
  delete db.data.pausedAllAt;
  try {
    await db.write();
  } catch (err) {
    // Handed over again at the next start, which changes nothing the shared state has but a pause lifted meanwhile.
    log.warn(
      { error: errorText(err) },
      "handed state.json's job state over to the shared state, but could not write state.json without it",
    );
  }
  log.info({ ...carried, pausedAll: pausedAllAt !== undefined }, "handed the job state of state.json over to the shared state");
}
