import { EventBus } from "./events.js";
import { errorText } from "./text.js";
import type { Logger } from "pino";
import { ConfigError } from "./config/errors.js";
import { loadConfig } from "./config/load.js";
import type { Config } from "./config/schema.js";
import { jobContext } from "./jobs/context.js";
import type { JobRegistry } from "./jobs/registry.js";
import type { Job } from "./jobs/types.js";
import { catchUp } from "./runner/catch-up.js";
import type { Runner } from "./runner/runner.js";
import { fireFromTrigger } from "./runner/requests.js";
import { sharedSessionId } from "./runner/session-ids.js";
import { PausedFiles } from "./runner/held-files.js";
import type { FireRequest } from "./runner/types.js";
import { openCore } from "./core.js";
import { acquireLock } from "./store/lock.js";
import { Retention } from "./store/retention.js";
import type { StateStore } from "./store/state.js";
import { ensureWritableDir } from "./store/writable-dir.js";
import { CronTrigger, recordFire } from "./triggers/cron.js";
import { WatchTrigger } from "./triggers/watch.js";
import { AfterTrigger } from "./triggers/after.js";
import { ArmedPublisher } from "./store/armed.js";
import type { DeliveryOutbox } from "./delivery/delivery-outbox.js";
import { join } from "node:path";
import { VERSION } from "./package.js";
import { LiveHub } from "./console/live.js";
import { Metrics } from "./console/metrics.js";
import { Rehearsals } from "./console/rehearsals.js";
import { startConsole, type ConsoleServer } from "./console/server.js";
import { WebhookTrigger } from "./triggers/webhook.js";
import { WebhookIds } from "./store/webhook-ids.js";

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
    // Known once the console listens, after the core is open; a run failing before then is alerted without it.
    let consoleUrl: string | undefined;
    // The core opens the backend first: a shared one that cannot serve stops the start before anything else is opened.
    const core = await openCore("daemon", {
      config: () => config,
      env,
      log: logger,
      events: new EventBus((event, err) => logger.error({ event, error: errorText(err) }, "event listener failed")),
      concurrency: config.runner.concurrency,
      consoleUrl: () => consoleUrl,
      registry: {
        onChange: (all) => {
          arm(all).catch((err: unknown) => logger.error({ err }, "could not apply the changed jobs"));
        },
        onProblems: (files) => void armed.setProblems(files),
      },
    });
    started.push(() => core.close());
    const { backend, state, jobs, runner, outbox, dispatcher, mailToFiles, ledger, checkIns: heartbeat } = core;
    const runtime = () => core.runtime();
    const interrupted = await state.markInterrupted(new Date());
    if (interrupted.length > 0) logger.warn({ runs: interrupted.length }, "runs left running by the last stop are marked interrupted");
    runtime().warnings.forEach((warning) => logger.warn(warning));
    // Listening before any run starts, here or on another daemon sharing the backend, so the live stream misses none.
    const live = new LiveHub(runtime().events, () => runtime().redactor, {
      node: backend.node,
      unpriced: (name) => {
        const job = jobs.get(name);
        try {
          return job !== undefined && !runtime().priced(job.overrides);
        } catch {
          // A provider the job cannot use (a preset missing its model) fails the run itself, saying why.
          return false;
        }
      },
    });
    started.push(() => live.close());
    if (mailToFiles) logger.warn({ dir: join(config.paths.state, "mail") }, "no smtp settings: mail is written as .eml files, not sent");
    started.push(() => runner.shutdown(0));
    // countd jobs, in another process, lists what this daemon fires from it.
    const armed = new ArmedPublisher(config.paths.state, logger);
    const fire = fireFromTrigger(runner, logger);
    const pausedFiles = new PausedFiles({ state, events: runtime().events, fire, node: backend.node, log: logger });
    started.push(() => pausedFiles.close());
    // The heartbeat's rules are asked before its scheduled fire runs, by the daemon that runs the slot.
    // A reload waits for the fires still being decided: once it returns, none of the old schedule is left to start.
    const deciding = new Set<Promise<unknown>>();
    const admitted = (req: FireRequest) => {
      const decided = heartbeat
        .admit(req)
        .then((admit) => admit && fire(admit))
        .catch((err: unknown) => logger.error({ job: req.job, error: errorText(err) }, "could not decide whether to fire"))
        .finally(() => deciding.delete(decided));
      deciding.add(decided);
    };
    // A slot is run once, here or by whichever daemon sharing the backend takes it; watched files are this daemon's own.
    const scheduled = backend.scheduled(admitted);
    const cron = new CronTrigger({ fire: scheduled, state, log: logger });
    const watch = new WatchTrigger({ fire, events: runtime().events, log: logger });
    // Asks the registry at each run's end, so a reload's followers are armed with no step of their own.
    const after = new AfterTrigger({ events: runtime().events, jobs: () => jobs.all(), fire, log: logger });
    started.push(
      () => armed.withdraw(),
      () => watch.close(),
      () => after.close(),
      () => cron.stop(),
    );
    const arm = async (all: Job[]) => {
      backend.retain(all);
      cron.set(all);
      await watch.set(all);
      await armed.setJobs(all);
    };
    // A variable missing from the daemon's environment is fixed where it is started, as countd.yaml's are: refused now, not found at 09:00.
    const { unset } = await jobs.load();
    if (unset.length > 0) throw new ConfigError(unset);
    await armed.setProblems(jobs.problemFiles());
    const view = await backend.view({
      live,
      runner,
      events: runtime().events,
      state: () => config.paths.state,
      keepMs: () => config.retention.sessionsMs,
      redactor: () => runtime().redactor,
    });
    // Once the jobs are loaded: a fire another daemon added names a job this daemon must know.
    backend.serve({
      runner,
      job: (name) => jobs.get(name),
      concurrency: config.runner.concurrency,
      interrupted: (job, run) => dispatcher.interrupted(job, run),
      admit: (req) => heartbeat.admit(req),
    });
    backend.retain(jobs.all());
    started.push(() => backend.stop(() => runner.shutdown(0)));
    const metrics = new Metrics({
      events: runtime().events,
      outbox,
      jobs,
      state,
      approvals: core.approvals.desk.store,
      node: backend.node,
    });
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
        redactor: () => runtime().redactor,
        startedAt: new Date(),
        version: VERSION,
        transcripts: view.transcripts,
        cancel: (run, why) => view.cancel(run, why),
        pausedFiles,
        rehearsals: new Rehearsals(env, logger),
        approvals: core.approvals.desk,
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
    // Once the jobs are armed: a run answered while countd was down goes on, and a request past its timeout is settled.
    await core.approvals.start();
    outbox.start();
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
          await core.reload(next);
          config = next;
          logger.info("configuration reloaded");
        } catch (err) {
          // A mistake in the file is the operator's to fix: its lines, each at file:line:col, not a stack trace.
          if (err instanceof ConfigError) err.problems.forEach((problem) => logger.error(problem));
          logger.error(err instanceof ConfigError ? {} : { err }, "configuration not reloaded; the previous one stays in force");
        }
        await jobs.reload(jobContext(config, env, () => runtime().mcp?.catalog()));
        await Promise.all(deciding);
        // A webhook gone with HTTP 410 may be back (the operator recreated it): SIGHUP is how they say so.
        await outbox.enableTargets("SIGHUP");
      },
      stop() {
        stopping ??= (async () => {
          cron.stop();
          heartbeat.close();
          await retention.stop();
          await Promise.all([watch.close(), jobs.close()]);
          const shutdown = () => runner.shutdown(config.runner.shutdownGraceMs);
          await backend.stop(shutdown);
          // After the runs: a client watching one sees it end.
          await consoleServer.close();
          live.close();
          metrics.close();
          await core.close();
          await armed.withdraw();
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
