import { ConfigError, SettingUnusable } from "../config/errors.js";
import type { EventBus } from "../events.js";
import { LLMError } from "../providers/errors.js";
import { LockHeld } from "../store/lock.js";
import type { RunStatus } from "../store/run-record.js";
import { errorText } from "../text.js";

/** No daemon answers on the state directory: exit 3, as `systemctl status` does for a stopped unit. */
export class NotRunning extends Error {}

/** What a run cancelled with Ctrl-C in `countd run` is recorded with, run here or in the daemon. */
export const CANCELLED_BY_USER = "cancelled by the user (Ctrl-C)";

/**
 * Exit codes a person and a service manager can act on: 2 is a usage error (as for the shell's
 * builtins), 3 is "not running" (as `systemctl status` says of a stopped unit), 78 (EX_CONFIG)
 * tells systemd not to restart in a loop, 75 (EX_TEMPFAIL) is a run that waits for an approval
 * (neither done nor failed), 124 is timeout(1)'s, 130 is Ctrl-C's.
 */
export const EXIT = { ok: 0, failure: 1, usage: 2, notRunning: 3, waiting: 75, timeout: 124, config: 78, interrupted: 130 } as const;

/** `countd run`'s exit code for how the run ended, whether it ran here or in the daemon. */
export function exitForStatus(status: RunStatus): number {
  if (status === "waiting") return EXIT.waiting;
  return status === "ok" ? EXIT.ok : status === "timeout" ? EXIT.timeout : status === "cancelled" ? EXIT.interrupted : EXIT.failure;
}

/** One line per tool call on stderr, for the runs whose session `belongs` accepts. */
export function printToolCalls(events: EventBus, belongs: (sessionId: string) => boolean): () => void {
  return events.on("tool.finished", (e) => {
    if (belongs(e.sessionId)) process.stderr.write(`${toolLine(e.name, e.arguments, Boolean(e.error), e.durationMs)}\n`);
  });
}

export function toolLine(name: string, args: unknown, failed: boolean, durationMs: number): string {
  return `[tool] ${name} ${shortArgs(args)} ${failed ? "error" : "ok"} ${Math.round(durationMs)}ms`;
}

export function shortArgs(args: unknown): string {
  const text = typeof args === "string" ? args : JSON.stringify(args ?? {});
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** An option's value the command cannot use (commander checks only what it can before the job is known): exit 2. */
export class UsageError extends Error {}

/** One readable line per failure: users of an unattended daemon read logs, not stack traces. */
export function reportError(err: unknown): number {
  if (err instanceof UsageError) {
    process.stderr.write(`countd: ${err.message}\n`);
    return EXIT.usage;
  }
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    return EXIT.config;
  }
  if (err instanceof LLMError) {
    const tries = err.attempts > 1 ? ` after ${err.attempts} attempts` : "";
    process.stderr.write(`countd: LLM request failed${tries}: ${err.message}\n`);
    return EXIT.failure;
  }
  if (err instanceof SettingUnusable) {
    process.stderr.write(`countd: ${err.message}\n`);
    return EXIT.config;
  }
  if (err instanceof NotRunning) {
    process.stderr.write(`countd: ${err.message}\n`);
    return EXIT.notRunning;
  }
  if (err instanceof LockHeld) {
    process.stderr.write(`countd: ${err.message}\n`);
    return EXIT.failure;
  }
  process.stderr.write(`countd: ${errorText(err)}\n`);
  return EXIT.failure;
}

/** A plain text table: columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n") + "\n";
}
