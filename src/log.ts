import pino, { type Logger } from "pino";
import { Redactor } from "./audit/redact.js";

/**
 * The daemon's own log (the audit log is separate): JSON lines on stdout for journald and log
 * shippers, readable text when a person watches a terminal.
 */
export function daemonLogger(opts: { pretty?: boolean; level?: string; secrets?: string[] } = {}): Logger {
  const pretty = opts.pretty ?? process.stdout.isTTY === true;
  const redactor = new Redactor(opts.secrets ?? []);
  return pino({
    level: opts.level ?? process.env["COUNTD_LOG_LEVEL"] ?? "info",
    base: undefined,
    hooks: {
      // Errors can quote what a tool or provider said; a secret must not reach the log through them.
      streamWrite: (line) => redactor.redact(line),
    },
    ...(pretty ? { transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss", ignore: "pid,hostname" } } } : {}),
  });
}

export type LogLevel = "debug" | "info" | "warn" | "error";

/** The (level, message, fields) callback every stage logs through; the daemon points it at pino. */
export type LogFn = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

export function logFn(logger: Logger): LogFn {
  return (level, message, fields) => logger[level](fields ?? {}, message);
}
