import { openBackend } from "./backend/open.js";
import type { Backend, DaemonBackend } from "./backend/types.js";
import type { Config } from "./config/schema.js";
import { stateStreaks } from "./delivery/alerts.js";
import { stateLastDelivered } from "./delivery/changed.js";
import { ownDeliveries } from "./delivery/own-deliveries.js";
import type { EventBus } from "./events.js";
import { jobContext } from "./jobs/context.js";
import { builtInJobs } from "./jobs/heartbeat.js";
import { JobRegistry, type JobRegistryOptions } from "./jobs/registry.js";
import type { Logger } from "./log.js";
import { openPipeline, type Pipeline, type PipelineOptions } from "./runner/pipeline.js";
import { openRuntime, type Runtime } from "./runtime.js";
import { SessionStore } from "./sessions/store.js";
import { lastExchange } from "./store/last-exchange.js";
import type { StateStore } from "./store/state.js";
import { CheckIns } from "./triggers/check-ins.js";
import { ApprovalTrigger } from "./triggers/approvals.js";
import { fireFromTrigger } from "./runner/requests.js";

/** What runs jobs, opened the same way for `countd start` and `countd run`. */
export interface Core<B extends Backend = Backend> extends Omit<Pipeline, "close"> {
  backend: B;
  state: StateStore;
  /** The runtime in force: a reload swaps it, and later runs use the new one. */
  runtime(): Runtime;
  /** The job files' jobs and the built-in ones, not loaded yet: the caller loads them once it can act on them. */
  jobs: JobRegistry;
  /** The heartbeat's gate, prompt and recorded check-ins. */
  checkIns: CheckIns;
  /** Runs waiting for a person's yes, the desk their answers reach, and the timeouts. */
  approvals: ApprovalTrigger;
  /** A runtime for `next` takes over; the previous one is closed. */
  reload(next: Config): Promise<void>;
  /** Closes what it opened: the state, delivery, the runtime, the backend. The runner is shut down by its owner first. */
  close(): Promise<void>;
}

export interface CoreOptions {
  /** countd.yaml as in force now (a daemon's reload changes it). */
  config: () => Config;
  env: NodeJS.ProcessEnv;
  log: Logger;
  events?: EventBus;
  /** Runs at once; more wait in arrival order. */
  concurrency: number;
  /** Around the executor, outside the heartbeat's: what the caller does around each run (`countd run`'s Ctrl-C). */
  wrap?: PipelineOptions["wrap"];
  consoleUrl?: PipelineOptions["consoleUrl"];
  /** What the daemon does as job files change. */
  registry?: Pick<JobRegistryOptions, "onChange" | "onProblems">;
}

/**
 * The daemon's core: its job state keeps failing streaks and pauses, so on_failure is throttled
 * across restarts and a paused job's fires are recorded skipped.
 */
export function openCore(role: "daemon", opts: CoreOptions): Promise<Core<DaemonBackend>>;
/** A one-off command's: failures are all reported (its streaks in memory) and it runs what it is asked, paused or not. */
export function openCore(role: "command", opts: CoreOptions): Promise<Core>;
export async function openCore(role: "daemon" | "command", opts: CoreOptions): Promise<Core<Backend>> {
  const { config, env, log } = opts;
  const backend = await openBackend(config(), { role, log });
  const undo: Array<() => Promise<unknown>> = [() => backend.close()];
  try {
    const state = await backend.openState();
    undo.unshift(() => state.close());
    // One for the process's life, so a reload keeps the blocks still to be sent to a shared backend.
    const sessions = backend.sessions(new SessionStore(config().paths.state));
    let runtime = await openRuntime(config(), env, opts.events, log, sessions);
    undo.unshift(() => runtime.close());
    const checkIns: CheckIns = new CheckIns({
      config,
      state,
      memory: () => runtime.memory,
      // The pipeline's, opened below: a check-in waits on it for its acknowledgement.
      outbox: () => pipeline.outbox,
      events: runtime.events,
      redactor: () => runtime.redactor,
      lastExchange: () => lastExchange(config().paths.state),
      log,
    });
    const jobs = new JobRegistry({
      dir: config().paths.jobs,
      ctx: jobContext(config(), env, () => runtime.mcp?.catalog()),
      stateDir: config().paths.state,
      log,
      ...opts.registry,
      builtIn: () => builtInJobs(config()),
    });
    const job = (name: string) => jobs.get(name);
    const wrap = opts.wrap;
    const kept = await backend.approvals();
    const approvals = new ApprovalTrigger({
      ...kept,
      // The pipeline's runner, opened below.
      fire: (request) => fireFromTrigger(pipeline.runner, log)(request),
      events: runtime.events,
      log,
    });
    undo.unshift(async () => approvals.close());
    const pipeline = await openPipeline({
      config: config(),
      env,
      state,
      runtime: () => runtime,
      job,
      concurrency: opts.concurrency,
      log,
      ...(role === "daemon" ? { streaks: stateStreaks(state), paused: (name: string) => state.isPaused(name) } : {}),
      // Both roles: what `countd run` delivered was delivered, and the daemon's next run compares with it.
      lastDelivered: stateLastDelivered(state),
      spend: (local) => backend.spend(local, { timeZone: () => config().budget.timezone, keptMs: () => config().retention.auditMs }),
      outbox: (send) => backend.outbox(send, ownDeliveries(job, config), runtime.events),
      node: backend.node,
      ...(opts.consoleUrl ? { consoleUrl: opts.consoleUrl } : {}),
      approvals: {
        store: kept.store,
        links: (approval) => {
          const base = opts.consoleUrl?.();
          return base === undefined ? undefined : approvals.desk.links(approval, base);
        },
      },
      waiting: (name) => approvals.waiting(name),
      continueJournal: (name, runId) => backend.continueJournal(name, runId),
      wrap: (execute) => (wrap ? wrap(checkIns.executor(execute)) : checkIns.executor(execute)),
    });
    undo.unshift(() => pipeline.close());
    const { close: closeDelivery, ...stages } = pipeline;
    return {
      ...stages,
      backend,
      state,
      runtime: () => runtime,
      jobs,
      checkIns,
      approvals,
      async reload(next) {
        const previous = runtime;
        runtime = await openRuntime(next, env, previous.events, log, sessions);
        await previous.close();
      },
      async close() {
        checkIns.close();
        approvals.close();
        await jobs.close();
        await state.close();
        await closeDelivery();
        await runtime.close();
        await backend.close();
      },
    };
  } catch (err) {
    for (const step of undo) await step().catch(() => {});
    throw err;
  }
}
