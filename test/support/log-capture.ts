import pino, { type Logger } from "pino";

export interface LogLine {
  level: "debug" | "info" | "warn" | "error";
  msg: string;
  /** Everything else on the line: the child's bindings (`component`) and the call's fields. */
  fields: Record<string, unknown>;
}

const LEVELS: Record<number, LogLine["level"]> = { 20: "debug", 30: "info", 40: "warn", 50: "error" };

/**
 * A real pino logger at debug level whose lines land in `lines`, parsed back from the JSON pino
 * wrote: what a component logs is checked as it would reach journald, fields and all.
 */
export function captureLog(): { log: Logger; lines: LogLine[]; text: () => string } {
  const lines: LogLine[] = [];
  const log = pino(
    { level: "debug", base: undefined, timestamp: false },
    {
      write(line: string) {
        const { level, msg, ...fields } = JSON.parse(line) as { level: number; msg: string };
        lines.push({ level: LEVELS[level] ?? "error", msg, fields });
      },
    },
  );
  return { log, lines, text: () => lines.map((line) => `${line.level}: ${line.msg}`).join("\n") };
}
