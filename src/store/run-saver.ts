import { silentLogger, type Logger } from "../log.js";
import { errorText } from "../text.js";
import type { RunRecord } from "./run-record.js";
import type { StateStore } from "./state.js";

/** A failed record save is tried again after this, then after twice as long each time, up to the max. */
const SAVE_RETRY_FIRST_MS = 1_000;
const SAVE_RETRY_MAX_MS = 60_000;

/**
 * Saves the runner's run records into the state store and does not let go of one it could not
 * save: a full disk or a Redis away must not lose a run's record, and must not fail the run either.
 * A failed record is kept and saved again (retryUnsaved) until the store takes it, unless a newer
 * record of the same run was handed on meanwhile; at shutdown (flush) what is still unsaved is
 * tried once more, then named in the log as lost.
 */
export class RunSaver {
  private readonly saving = new Set<Promise<void>>();
  /** The latest record handed to save, by `<job>/<id>`, until it is on disk. */
  private readonly newest = new Map<string, RunRecord>();
  /** Records whose latest save failed, waiting for retryUnsaved. */
  private readonly unsaved = new Map<string, RunRecord>();
  private retry: NodeJS.Timeout | undefined;
  private retryMs = SAVE_RETRY_FIRST_MS;
  private lastError = "";
  private readonly log: Logger;

  constructor(
    private readonly store: Pick<StateStore, "saveRun" | "knownRunIds">,
    opts: { log?: Logger } = {},
  ) {
    // The runner's component: operators have always found these lines beside the runs they are about.
    this.log = (opts.log ?? silentLogger).child({ component: "runner" });
  }

  /** Ids of the job's runs the store knows without reading its file (StateStore.knownRunIds). */
  knownRunIds(job: string): string[] {
    return this.store.knownRunIds(job);
  }

  /**
   * Saves a copy (the store keeps the object it is given). Resolves once it is saved or, when
   * the save failed, kept for a later try: a failure is logged, never thrown.
   */
  save(record: RunRecord): Promise<void> {
    const key = `${record.job}/${record.id}`;
    this.newest.set(key, record);
    this.unsaved.delete(key);
    const saving = this.store.saveRun({ ...record }).then(
      () => {
        if (this.newest.get(key) === record) this.newest.delete(key);
      },
      (err: unknown) => {
        if (this.newest.get(key) !== record) return;
        this.unsaved.set(key, record);
        this.lastError = errorText(err);
        // One line per outage, not per record: with every save failing, a line each would flood the log.
        if (this.retry) return;
        this.log.error(
          { job: record.job, runId: record.id, error: this.lastError, retryInMs: this.retryMs },
          "could not save a run record; kept, saved again later",
        );
        this.retry = setTimeout(() => void this.retryUnsaved(), this.retryMs).unref();
      },
    );
    this.saving.add(saving);
    void saving.finally(() => this.saving.delete(saving));
    return saving;
  }

  /**
   * At shutdown, once no more records come: waits for the saves in flight, tries once more every
   * record still unsaved, and names in the log those that are lost.
   */
  async flush(): Promise<void> {
    await Promise.all(this.saving);
    clearTimeout(this.retry);
    this.retry = undefined;
    if (this.unsaved.size > 0) await this.retryUnsaved();
    if (this.unsaved.size > 0) {
      clearTimeout(this.retry);
      const ids = [...this.unsaved.keys()];
      this.log.error({ records: ids.length, runs: ids }, "countd stopped with run records it could not save, now lost");
    }
  }

  /** One more try for every record a save failed for; the wait doubles while the failures last. */
  private async retryUnsaved(): Promise<void> {
    const records = [...this.unsaved.values()];
    this.unsaved.clear();
    await Promise.all(records.map((record) => this.save(record)));
    clearTimeout(this.retry);
    this.retry = undefined;
    if (this.unsaved.size > 0) {
      this.retryMs = Math.min(this.retryMs * 2, SAVE_RETRY_MAX_MS);
      this.log.error({ records: this.unsaved.size, error: this.lastError, retryInMs: this.retryMs }, "run records still not saved");
      this.retry = setTimeout(() => void this.retryUnsaved(), this.retryMs).unref();
    } else {
      this.retryMs = SAVE_RETRY_FIRST_MS;
      this.log.info({ records: records.length }, "saved the run records that could not be saved before");
    }
  }
}
