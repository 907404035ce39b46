import { EventBus } from "./events.js";
import { errorText } from "./text.js";
import type { Logger } from "pino";
import { ConfigError } from "./config/errors.js";
import { loadConfig } from "./config/load.js";
import type { Config } from "./config/schema.js";
import { jobContext } from "./jobs/context.js";
import { JobRegistry } from "./jobs/registry.js";
import type { Job } from "./jobs/types.js";
import { catchUp } from "./runner/catch-up.js";
import type { Runner } from "./runner/runner.js";
import { sharedSessionId } from "./runner/session-ids.js";
import { openPipeline } from "./runner/pipeline.js";
import { PausedFiles } from "./runner/held-files.js";
import type { FireRequest } from "./runner/types.js";
import { openRuntime } from "./runtime.js";
import { acquireLock } from "./store/lock.js";
import { lastExchange } from "./store/last-exchange.js";
import { Retention } from "./store/retention.js";
import { StateStore } from "./store/state.js";
import { ensureWritableDir } from "./store/writable-dir.js";
import { CronTrigger, recordFire } from "./triggers/cron.js";
import { WatchTrigger } from "./triggers/watch.js";
import { HeartbeatService } from "./triggers/heartbeat.js";
import { ArmedPublisher } from "./store/armed.js";
import { deliverCheckIn, runCheckIn, withHeartbeat } from "./runner/heartbeat-runs.js";
import { stateStreaks } from "./delivery/alerts.js";
import type { DeliveryOutbox } from "./delivery/delivery-outbox.js";
import { join } from "node:path";
import { VERSION } from "./package.js";
import { LiveHub } from "./console/live.js";
import { Metrics } from "./console/metrics.js";
import { startConsole, type ConsoleServer } from "./console/server.js";
import { WebhookTrigger } from "./triggers/webhook.js";
import { WebhookIds } from "./store/webhook-ids.js";
import { Cluster } from "./cluster/cluster.js";
import { ownDeliveries } from "./cluster/own-deliveries.js";
import { fileTranscripts } from "./store/transcripts.js";
import { SessionStore } from "./sessions/store.js";

export interface Daemon {
  config: Config;
  state: StateStore;
  outbox: DeliveryOutbox;
  jobs: JobRegistry;
  runner: Runner;
  cron: CronTrigger;
  /** Where the console and the control socket listen. */
  console: ConsoleServer;
  /** SIGHUP: the configuration is read again (kept if invalid) and every job file re-read. */
  reload(): Promise<void>;
  /** SIGTERM/SIGINT: triggers stop, running jobs get the grace period, then are cancelled. */
  stop(): Promise<void>;
}

export interface DaemonOptions {
  configFile?: string;
  env?: NodeJS.ProcessEnv;
  logger: Logger;
  /** Another process took the state directory's lock file: the daemon has logged it and must be stopped. */
  onLockTaken?: () => void;
}

/** The composition root: config → stores → agent → triggers, each stage handed plain callbacks. */
export async function startDaemon({ configFile, env = process.env, logger, onLockTaken }: DaemonOptions): Promise<Daemon> {
  let config = await loadConfig({ file: configFile, env });
  await ensureWritableDir(config.paths.state, "state");
  await ensureWritableDir(config.paths.logs, "logs");
  const release = await acquireLock(config.paths.state, process.pid, {
    log: logger,
    onTaken: (problem) => {
      // Two daemons must never write one state directory: the one that finds itself displaced yields.
      logger.error(`${problem}; stopping`);
      onLockTaken?.();
    },
  });
  /**
   * How to undo what start-up has set going so far: a step that fails undoes these in reverse,
   * so a daemon that did not start keeps nothing running (a watcher or timer would keep the
   * process alive, firing jobs, with no one listening for SIGTERM).
   */
  const started: Array<() => unknown> = [];
  try {
    // In a cluster, Redis is checked first: unusable, it stops the start before anything is opened.
    const cluster = config.cluster ? await Cluster.join(config.cluster, logger) : undefined;
    if (cluster) started.push(() => cluster.close());
    const state = await StateStore.open(config.paths.state, { log: logger, history: cluster?.history, shared: cluster?.state });
    const interrupted = await state.markInterrupted(new Date());
    if (interrupted.length > 0) logger.warn({ runs: interrupted.length }, "runs left running by the last stop are marked interrupted");

    // One for the daemon's life, so a reload keeps the blocks still to be sent to Redis.
    const sessions = cluster?.sessions(new SessionStore(config.paths.state));
    let runtime = await openRuntime(
      config,
      env,
      new EventBus((event, err) => logger.error({ event, error: errorText(err) }, "event listener failed")),
      logger,
      sessions,
    );
    started.push(() => runtime.close());
    runtime.warnings.forEach((warning) => logger.warn(warning));
    const jobOf = withHeartbeat(
      (name) => jobs.get(name),
      () => runtime.config,
    );
    // Listening before any run starts, here or (in a cluster) on another node, so the live stream misses none.
    const live = new LiveHub(runtime.events, () => runtime.redactor, {
      node: config.cluster?.node,
      unpriced: (name) => {
        const job = jobOf(name);
        try {
          return job !== undefined && !runtime.priced(job.overrides);
        } catch {
          // A provider the job cannot use (a preset missing its model) fails the run itself, saying why.
          return false;
        }
      },
    });
    started.push(() => live.close());

    // Known once the console listens, after the pipeline is open; a run failing before then is alerted without it.
    let consoleUrl: string | undefined;
    const {
      runner,
      outbox,
      dispatcher,
      mailToFiles,
      ledger,
      close: closeDelivery,
    } = await openPipeline({
      config,
      env,
      state,
      // Through getters: a reload swaps the runtime, and later runs use the new one.
      runtime: () => runtime,
      job: jobOf,
      concurrency: config.runner.concurrency,
      log: logger,
      streaks: stateStreaks(state),
      paused: (name) => state.isPaused(name),
      ...(cluster
        ? { spend: (local) => cluster.spend(local, { timeZone: () => config.budget.timezone, keptMs: () => config.retention.auditMs }) }
        : {}),
      ...(cluster
        ? {
            outbox: async (send) =>
              cluster.outbox(
                send,
                ownDeliveries(jobOf, () => runtime.config),
                runtime.events,
              ),
          }
        : {}),
      consoleUrl: () => consoleUrl,
    });
    started.push(closeDelivery);
    if (mailToFiles) logger.warn({ dir: join(config.paths.state, "mail") }, "no smtp settings: mail is written as .eml files, not sent");
    started.push(() => runner.shutdown(0));
    // countd jobs, in another process, lists what this daemon fires from it.
    const armed = new ArmedPublisher(config.paths.state, logger);
    const checkIns = config.heartbeat.enabled
      ? new HeartbeatService({
          config: config.heartbeat,
          state,
          memory: runtime.memory,
          persona: config.persona,
          runAgent: (prompt, tools) => runCheckIn(runner, prompt, tools),
          deliver: (text, run) => deliverCheckIn(dispatcher, outbox, config, text, run),
          lastExchange: () => lastExchange(config.paths.state),
          onScheduled: (at) => void armed.setHeartbeat(at, config.heartbeat.everyMs),
          // One daemon decides each tick, on the state as the last tick (on any node) left it.
          claimTick: cluster
            ? async (slot) => (await cluster.claimTick(slot, config.heartbeat.everyMs)) && (await state.refresh(), true)
            : undefined,
          events: runtime.events,
          log: logger,
        })
      : undefined;
    const fire = (req: FireRequest) => runner.submit(req);
    const pausedFiles = new PausedFiles({ state, events: runtime.events, fire, node: config.cluster?.node, log: logger });
    started.push(() => pausedFiles.close());
    // In a cluster a slot is run once, by whichever daemon takes it; watched files are this daemon's own.
    const scheduled = cluster ? (req: FireRequest) => cluster.fire(req) : fire;
    const cron = new CronTrigger({ fire: scheduled, state, log: logger });
    const watch = new WatchTrigger({ fire, events: runtime.events, log: logger });
    started.push(
      () => armed.withdraw(),
      () => watch.close(),
      () => cron.stop(),
      () => checkIns?.stop(),
    );
    const arm = async (all: Job[]) => {
      cluster?.retain(all);
      cron.set(all);
      await watch.set(all);
      await armed.setJobs(all);
    };
    const jobs = new JobRegistry({
      dir: config.paths.jobs,
      ctx: jobContext(config, env, () => runtime.mcp?.catalog()),
      log: logger,
      onChange: (all) => {
        arm(all).catch((err: unknown) => logger.error({ err }, "could not apply the changed jobs"));
      },
      onProblems: (files) => void armed.setProblems(files),
    });

    // A variable missing from the daemon's environment is fixed where it is started, as countd.yaml's are: refused now, not found at 09:00.
    const { unset } = await jobs.load();
    if (unset.length > 0) throw new ConfigError(unset);
    await armed.setProblems(jobs.problemFiles());
    const localTranscripts = fileTranscripts(() => config.paths.state, { log: logger, moveAside: true });
    const view = cluster
      ? await cluster.openView({
          live,
          runner,
          events: runtime.events,
          state: () => config.paths.state,
          keepMs: () => config.retention.sessionsMs,
          redactor: () => runtime.redactor,
        })
      : undefined;
    if (cluster) {
      // Once the jobs are loaded: a fire taken from the cluster names a job this daemon must know.
      cluster.serve({
        runner,
        job: (name) => jobs.get(name),
        concurrency: config.runner.concurrency,
        interrupted: (job, run) => dispatcher.interrupted(job, run),
      });
      cluster.retain(jobs.all());
      started.push(() => cluster.stop(() => runner.shutdown(0)));
    }
    const metrics = new Metrics({ events: runtime.events, outbox, jobs, state, node: config.cluster?.node });
    started.push(() => metrics.close());
    const hooks = new WebhookTrigger({
      job: (name) => jobs.get(name),
      runner,
      ids: await WebhookIds.open(config.paths.state),
      env,
      log: logger,
    });
    // A port in use stops the start here.
    const consoleServer = await startConsole(
      {
        config: () => config,
        state,
        runner,
        jobs,
        outbox,
        cron,
        live,
        metrics,
        hooks,
        ledger,
        redactor: () => runtime.redactor,
        startedAt: new Date(),
        version: VERSION,
        transcripts: view?.transcripts ?? localTranscripts,
        cluster: view,
        pausedFiles,
      },
      logger,
    );
    consoleUrl = consoleServer.url;
    started.push(() => consoleServer.close());
    // Watching before arming: a job file changed meanwhile is applied, not missed.
    await jobs.watch();
    started.push(() => jobs.close());
    for (const run of interrupted) {
      const job = jobs.get(run.job);
      if (job) await dispatcher.interrupted(job, run);
    }
    await catchUpMissed(jobs.all(), state, scheduled);
    await arm(jobs.all());
    // A job resumed while countd was stopped runs what its watcher saw while it was paused.
    await pausedFiles.release();
    outbox.start();
    checkIns?.start();
    const retention = new Retention({
      settings: () => ({ stateDir: config.paths.state, logsDir: config.paths.logs, retention: config.retention }),
      sessionsInUse: () => {
        const inUse = runner.sessionsInUse();
        for (const job of jobs.all()) if (job.session === "shared") inUse.add(sharedSessionId(job.name));
        return inUse;
      },
      log: logger,
    });
    retention.start();
    logger.info({ jobs: jobs.all().length, dir: config.paths.jobs }, "countd started");

    let stopping: Promise<void> | undefined;
    return {
      get config() {
        return config;
      },
      state,
      outbox,
      jobs,
      runner,
      cron,
      console: consoleServer,
      async reload() {
        try {
          const next = await loadConfig({ file: configFile, env });
          const nextRuntime = await openRuntime(next, env, runtime.events, logger, sessions);
          const previous = runtime;
          config = next;
          runtime = nextRuntime;
          await previous.close();
          logger.info("configuration reloaded");
        } catch (err) {
          // A mistake in the file is the operator's to fix: its lines, each at file:line:col, not a stack trace.
          if (err instanceof ConfigError) err.problems.forEach((problem) => logger.error(problem));
          logger.error(err instanceof ConfigError ? {} : { err }, "configuration not reloaded; the previous one stays in force");
        }
        await jobs.reload(jobContext(config, env, () => runtime.mcp?.catalog()));
        // A webhook gone with HTTP 410 may be back (the operator recreated it): SIGHUP is how they say so.
        await outbox.enableTargets("SIGHUP");
      },
      stop() {
        stopping ??= (async () => {
          cron.stop();
          checkIns?.stop();
          await retention.stop();
          await Promise.all([watch.close(), jobs.close()]);
          const shutdown = () => runner.shutdown(config.runner.shutdownGraceMs);
          await (cluster ? cluster.stop(shutdown) : shutdown());
          // After the runs: a client watching one sees it end.
          await consoleServer.close();
          live.close();
          metrics.close();
          await state.close();
          await closeDelivery();
          await runtime.close();
          await armed.withdraw();
          await cluster?.close();
          await release();
          logger.info("countd stopped");
        })();
        return stopping;
      },
    };
  } catch (err) {
    for (const undo of started.reverse()) {
      await Promise.resolve()
        .then(undo)
        .catch((undoErr: unknown) => logger.error({ err: undoErr }, "could not undo a step of the failed start"));
    }
    await release();
    throw err;
  }
}

/** After downtime: one run for each job whose latest missed slot lies inside its catch-up window. */
async function catchUpMissed(jobs: readonly Job[], state: StateStore, fire: (req: FireRequest) => void): Promise<void> {
  const now = new Date();
  for (const job of jobs) {
    const req = catchUp(job, state.job(job.name), now);
    if (!req) continue;
    await recordFire(state, job, req.scheduledAt);
    fire(req);
  }
}
