import type { EventBus } from "../events.js";
import { silentLogger, type Logger } from "../log.js";
import { MAX_RECORDED_FILES, type RunRecord } from "../store/run-record.js";
import type { HeldFiles, StateStore } from "../store/state.js";
import { errorText } from "../text.js";
import { PAUSED } from "./overlap.js";
import type { FireRequest } from "./types.js";

/** As many paths as one run's `{{files}}` lists; more are counted. */
const MAX_HELD_FILES = MAX_RECORDED_FILES;
/** Where daemons share a backend a job may be resumed on another node: how often this one looks for its files to run. */
const CLUSTER_CHECK_MS = 5_000;

export interface PausedFilesOptions {
  state: StateStore;
  events: EventBus;
  fire: (req: FireRequest) => void;
  /** The node this daemon is, when daemons share a backend; undefined alone. */
  node?: string;
  log?: Logger;
}

/**
 * The files a watch job's fires carried while it was paused. The watcher reports a change once,
 * so they would be lost: they are kept in the job's state (state.json, or the shared backend), and
 * run as one batch (reason `watch`) once the job is resumed, as a queue keeps what arrived while
 * its consumer was stopped. Bounded like `{{files}}`; what is beyond is counted and logged.
 */
export class PausedFiles {
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  private readonly holding = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: PausedFilesOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "runner" });
    this.unsubscribe = opts.events.on("run.finished", ({ run }) => {
      const held = this.hold(run).finally(() => this.holding.delete(held));
      this.holding.add(held);
    });
    if (opts.node !== undefined) this.timer = setInterval(() => void this.release(), CLUSTER_CHECK_MS).unref();
  }

  close(): void {
    this.unsubscribe();
    clearInterval(this.timer);
  }

  /** Fires the files held for every job that is no longer paused, one run per job: after a resume, and at start. */
  async release(): Promise<void> {
    await Promise.all(this.holding);
    for (const [name, job] of Object.entries(this.opts.state.data.jobs)) {
      if (!job.held || job.held.node !== this.opts.node || this.opts.state.isPaused(name)) continue;
      let taken: HeldFiles | undefined;
      try {
        await this.opts.state.update((data) => {
          // Asked again on a fresh read when another daemon changed the state meanwhile.
          const state = data.jobs[name];
          taken = state?.held?.node === this.opts.node ? state?.held : undefined;
          if (!state || !taken) return;
          delete state.held;
          if (Object.keys(state).length === 0) delete data.jobs[name];
        });
      } catch (err) {
        this.log.error(
          { job: name, err: errorText(err) },
          "the files held while the job was paused could not be taken; tried again at the next resume or start",
        );
        continue;
      }
      if (!taken) continue;
      this.log.info(
        { job: name, files: taken.files.length, notKept: taken.overflow },
        "job fires for the files that changed while it was paused",
      );
      this.opts.fire({ job: name, reason: "watch", scheduledAt: new Date(), files: taken.files });
    }
  }

  private async hold(run: RunRecord): Promise<void> {
    if (run.status !== "skipped" || run.error !== PAUSED || run.files === undefined) return;
    const files = run.files;
    try {
      await this.opts.state.update((data) => {
        const state = (data.jobs[run.job] ??= {});
        const kept = new Set(state.held?.files);
        let overflow = (state.held?.overflow ?? 0) + (run.moreFiles ?? 0);
        for (const file of files) {
          if (kept.has(file)) continue;
          if (kept.size < MAX_HELD_FILES) kept.add(file);
          else overflow++;
        }
        state.held = { files: [...kept], overflow, ...(this.opts.node !== undefined ? { node: this.opts.node } : {}) };
      });
    } catch (err) {
      this.log.error(
        { job: run.job, runId: run.id, files: files.length, err: errorText(err) },
        "the files a paused job's fire carried could not be kept; they will not run at resume",
      );
    }
  }
}
