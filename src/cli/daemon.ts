import { loadConfig } from "../config/load.js";
import { startDaemon } from "../daemon.js";
import { daemonLogger } from "../log.js";
import { EXIT } from "./output.js";

/**
 * `countd start`: the daemon in the foreground until SIGTERM or SIGINT (a second one exits at
 * once); SIGHUP reloads the configuration and the jobs.
 */
export async function start(opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config });
  const logger = daemonLogger({ secrets: config.secrets });
  const daemon = await startDaemon({ configFile: opts.config, logger });
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(EXIT.interrupted);
      stopping = true;
      logger.info({ signal, graceMs: daemon.config.runner.shutdownGraceMs }, "stopping: running jobs get the grace period");
      daemon.stop().then(
        () => resolve(EXIT.ok),
        (err: unknown) => {
          logger.error({ err }, "countd did not stop cleanly");
          resolve(EXIT.failure);
        },
      );
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    process.on("SIGHUP", () => {
      logger.info("SIGHUP: reloading the configuration and the jobs");
      void daemon.reload();
    });
  });
}
