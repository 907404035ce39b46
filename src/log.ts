import { createRequire } from "node:module";
import type { Logger, LoggerOptions } from "pino";
import { Redactor } from "./audit/redact.js";

/**
 * The daemon's own log (the audit log is separate): JSON lines for journald and log shippers,
 * readable text when a person watches a terminal. `destination`: stdout (1, the default),
 * stderr (2: commands whose stdout is their answer), or a file (always JSON lines).
 */
export function daemonLogger(opts: { pretty?: boolean; level?: string; secrets?: string[]; destination?: 1 | 2 | string } = {}): Logger {
  // Loaded by the first logger made: commands that only read state (countd jobs, status) make none.
  const pino = createRequire(import.meta.url)("pino") as typeof import("pino").default;
  const destination = opts.destination ?? 1;
  const terminal = destination === 1 ? process.stdout.isTTY : destination === 2 ? process.stderr.isTTY : false;
  const pretty = opts.pretty ?? terminal === true;
  const redactor = new Redactor(opts.secrets ?? []);
  const options: LoggerOptions = {
    level: opts.level ?? process.env["COUNTD_LOG_LEVEL"] ?? "info",
    base: undefined,
    hooks: {
      // Errors can quote what a tool or provider said; a secret must not reach the log through them.
      streamWrite: (line) => redactor.redact(line),
    },
    ...(pretty
      ? {
          transport: {
            target: "pino-pretty",
            options: { colorize: true, translateTime: "SYS:HH:MM:ss", ignore: "pid,hostname", destination },
          },
        }
      : {}),
  };
  return pretty || destination === 1 ? pino(options) : pino(options, pino.destination({ dest: destination, sync: true }));
}

export type { Logger };

/**
 * What a component logs to when it is given no logger: nothing. Every component takes a pino
 * logger and makes a child of it naming itself (`{ component: "runner" }`), so a line says
 * which part of countd wrote it and carries its values as fields, not spliced into the text.
 */
export const silentLogger: Logger = silent();

/**
 * A logger that writes nothing, as pino's level "silent" does, without loading pino and its
 * stream workers: the stores and commands that fall back on it mostly never log at all.
 * Components call its level methods and child(), nothing else.
 */
function silent(): Logger {
  const nothing = () => {};
  const logger = {
    level: "silent",
    fatal: nothing,
    error: nothing,
    warn: nothing,
    info: nothing,
    debug: nothing,
    trace: nothing,
    silent: nothing,
    child: () => logger,
    isLevelEnabled: () => false,
  };
  return logger as unknown as Logger;
}
