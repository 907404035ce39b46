import type { Config } from "../config/schema.js";
import type { StreakStore } from "../delivery/alerts.js";
import type { LastDeliveredStore } from "../delivery/changed.js";
import { openDelivery, type RunDispatcher } from "../delivery/dispatch.js";
import type { DeliveryOutbox, SendFn } from "../delivery/delivery-outbox.js";
import { silentLogger, type Logger } from "../log.js";
import type { Runtime } from "../runtime.js";
import type { StateStore } from "../store/state.js";
import { errorText } from "../text.js";
import { jobExecutor } from "./execute.js";
import { Budgets } from "../cost/budget.js";
import { RunSaver } from "../store/run-saver.js";
import { SpendLedger, type SpendBook } from "../store/spend-ledger.js";
import { Runner, type RunnerOptions } from "./runner.js";
import { redactedExecutor } from "./redacted-run.js";
import { RunJournals } from "./journaled-run.js";
import { suspendRun, type Approvals } from "./suspend.js";

/** The stages a run passes through, composed the same way for the daemon and `countd run`. */
export interface Pipeline {
  runner: Runner;
  outbox: DeliveryOutbox;
  dispatcher: RunDispatcher;
  /** True when mail is written as .eml files because there are no smtp settings. */
  mailToFiles: boolean;
  /** What every LLM call cost, which the budgets count; the console shows today's. */
  ledger: SpendBook;
  /** Closes the delivery stage (the runner is shut down by its owner, who knows the grace period). */
  close(): Promise<void>;
}

export interface PipelineOptions {
  config: Config;
  env: NodeJS.ProcessEnv;
  /** Where run records are saved (a rehearsal's go nowhere). */
  state: Pick<StateStore, "saveRun" | "knownRunIds">;
  /** Through a getter: a reload swaps the runtime, and later runs use the new one. */
  runtime: () => Runtime;
  job: RunnerOptions["job"];
  concurrency: number;
  log?: Logger;
  /** Where failing streaks are kept (in memory when absent). */
  streaks?: StreakStore;
  /** Where each job's last delivered answer is kept, for deliver_when: changed (in memory when absent). */
  lastDelivered?: LastDeliveredStore;
  /** Wraps the job executor, for a caller that acts around each run (`countd run` and its Ctrl-C). */
  wrap?: (execute: RunnerOptions["execute"]) => RunnerOptions["execute"];
  /** The clock of the runner and the budgets (tests); the system's by default. */
  now?: () => Date;
  /** Whether a job is paused (the state store's pauses); its scheduled and watched fires are recorded skipped. */
  paused?: RunnerOptions["paused"];
  /** Where the budgets count, given this process's ledger: the backend's (every daemon's calls, where several share it). */
  spend: (local: SpendLedger) => SpendBook;
  /** Opens the backend's outbox, sending with `send`. */
  outbox: (send: SendFn) => Promise<DeliveryOutbox>;
  /** The name each run's record carries when several daemons share the backend. */
  node?: string;
  /** The console's address while the daemon serves one, which failure alerts link to. */
  consoleUrl?: () => string | undefined;
  /** Where a run that needs a person's yes waits (runner/suspend.ts); without, such a call is refused. */
  approvals?: Approvals;
  /** Whether a job has a run waiting for an answer: its overlap counts it as running. */
  waiting?: (job: string) => boolean;
  /** Brings a resumed run's journal so far here, where another node kept it. */
  continueJournal?: (job: string, runId: string) => Promise<void>;
}

/**
 * Runner → dispatcher → outbox: the runner hands each run's outcome with its final record to
 * the dispatcher, which queues the deliveries before the record is saved, so an ok run always
 * has its deliveries (a crash in between leaves it `running`, reported as interrupted).
 */
export async function openPipeline(opts: PipelineOptions): Promise<Pipeline> {
  const { config, log = silentLogger } = opts;
  const delivery = await openDelivery({
    config,
    env: opts.env,
    workspace: () => opts.runtime().config.paths.workspace,
    log,
    streaks: opts.streaks,
    lastDelivered: opts.lastDelivered,
    events: opts.runtime().events,
    outbox: opts.outbox,
    ...(opts.consoleUrl ? { consoleUrl: opts.consoleUrl } : {}),
    redactor: () => opts.runtime().redactor,
  });
  const pipelineLog = log.child({ component: "pipeline" });
  const now = opts.now;
  const local = await SpendLedger.open(config.paths.state, { log, ...(now ? { now } : {}) });
  const ledger = opts.spend(local);
  const budgets = new Budgets({ ledger, daemon: () => opts.runtime().config.budget, ...(now ? { now } : {}) });
  // Where daemons share a backend, the node each run and its journal record.
  const node = opts.node;
  const journals = new RunJournals({
    state: () => opts.runtime().config.paths.state,
    redactor: () => opts.runtime().redactor,
    node,
    log,
    ...(opts.continueJournal ? { continueJournal: opts.continueJournal } : {}),
  });
  const execute = journals.executor(
    redactedExecutor(jobExecutor(opts.runtime, budgets, opts.approvals !== undefined), () => opts.runtime().redactor),
  );
  const runner = new Runner({
    job: opts.job,
    records: new RunSaver(opts.state, { log }),
    concurrency: opts.concurrency,
    log,
    paused: opts.paused,
    ...(opts.waiting ? { waiting: opts.waiting } : {}),
    events: opts.runtime().events,
    node,
    execute: opts.wrap ? opts.wrap(execute) : execute,
    ...(now ? { now } : {}),
    beforeRunEnd: async (job, run, { willRetry, outcome }) => {
      if (run.status === "waiting" && outcome.suspended && opts.approvals) {
        const approve = job.approve ?? opts.runtime().config.approve;
        const { suspended } = outcome;
        await suspendRun(job, run, suspended, {
          approve: approve!,
          approvals: opts.approvals,
          dispatcher: delivery.dispatcher,
          journals,
          events: opts.runtime().events,
          log: pipelineLog,
          clockAt: new Date(run.startedAt),
          now: now?.() ?? new Date(),
          ...(node !== undefined ? { node } : {}),
        });
        return;
      }
      const { queued, notDelivered } = await delivery.dispatcher.finished(job, run, outcome, willRetry).catch((err: unknown) => {
        pipelineLog.error({ job: job.name, runId: run.id, error: errorText(err) }, "could not queue the run's deliveries");
        return { queued: [], notDelivered: undefined };
      });
      await journals.end(run, queued, outcome, notDelivered);
      return notDelivered !== undefined ? { notDelivered } : {};
    },
  });
  return {
    runner,
    outbox: delivery.outbox,
    dispatcher: delivery.dispatcher,
    mailToFiles: delivery.mailToFiles,
    ledger,
    async close() {
      await Promise.all([delivery.close(), ledger.flush()]);
    },
  };
}
