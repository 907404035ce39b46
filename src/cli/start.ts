import { loadConfig } from "../config/load.js";
import { startDaemon, type Daemon } from "../daemon.js";
import { daemonLogger } from "../log.js";
import { EXIT } from "./output.js";

/** How long a stopped daemon's process may linger before it exits regardless. */
const LINGER_MS = 1_000;

/**
 * `countd start`: the daemon in the foreground until SIGTERM or SIGINT (a second one exits at
 * once); SIGHUP reloads the configuration and the jobs. The handlers are in place before the
 * daemon says it started, so a signal that arrives at any moment still stops it cleanly. A daemon
 * whose lock another process took stops the same way and exits 1.
 */
export async function start(opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config });
  const logger = daemonLogger({ secrets: config.secrets });
  let daemon: Daemon | undefined;
  let stopRequested: NodeJS.Signals | "lock taken" | undefined;
  let exitCode: number = EXIT.ok;
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => (finish = resolve));

  const stop = (signal: NodeJS.Signals | "lock taken") => {
    if (stopRequested) process.exit(EXIT.interrupted);
    stopRequested = signal;
    if (!daemon) return;
    logger.info({ signal, graceMs: daemon.config.runner.shutdownGraceMs }, "stopping: running jobs get the grace period");
    daemon.stop().then(
      () => {
        finish(exitCode);
        // Whatever a library still holds open (BullMQ's workers, while Redis is away, wait for it for ever) does not keep a stopped daemon alive.
        setTimeout(() => process.exit(exitCode), LINGER_MS).unref();
      },
      (err: unknown) => {
        logger.error({ err }, "countd did not stop cleanly");
        finish(EXIT.failure);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.on("SIGHUP", () => {
    if (!daemon) return;
    logger.info("SIGHUP: reloading the configuration and the jobs");
    void daemon.reload();
  });

  daemon = await startDaemon({
    configFile: opts.config,
    logger,
    onLockTaken: () => {
      exitCode = EXIT.failure;
      if (!stopRequested) stop("lock taken");
    },
  });
  if (stopRequested) {
    const signal = stopRequested;
    stopRequested = undefined;
    stop(signal);
  }
  return finished;
}
