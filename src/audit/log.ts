import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import type { CountdEvents, EventBus } from "../events.js";
import { excerpt } from "../text.js";
import { Redactor } from "./redact.js";

export type ToolAuditRecord = CountdEvents["tool.finished"];
export type LlmAuditRecord = CountdEvents["llm.finished"];
export type MessageAuditRecord = CountdEvents["message.finished"];

/** A tool result in the audit log is evidence, not a copy: enough to see what came back. */
export const RESULT_EXCERPT_CHARS = 2_000;

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** YYYY-MM-DD in local time: the day an operator looks for. */
export function localDate(d: Date): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** ISO 8601 in local time with its offset, so a line's date matches its file's date. */
export function localIso(d: Date): string {
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const abs = Math.abs(offset);
  return (
    `${localDate(d)}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}` +
    `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`
  );
}

/** A result as the audit line keeps it: cut after RESULT_EXCERPT_CHARS, saying how long it was. */
function kept(text: string): string {
  return excerpt(text, RESULT_EXCERPT_CHARS, ` [truncated: ${text.length} chars in all]`);
}

/**
 * The audit trail: one JSON line per tool call, LLM call and finished message, in
 * `<dir>/audit-YYYY-MM-DD.jsonl` (a new file each local day). Lines are written synchronously, so
 * a crash loses none, and every line passes through the Redactor, so no known secret reaches disk.
 */
export class AuditLog {
  private readonly dir: string;
  private readonly redactor: Redactor;
  private readonly logger: Logger;
  /** The time pino stamped on the line being written; it also picks the file. */
  private stamp = new Date(0);
  private knownFile = "";
  private readonly detachers = new Set<() => void>();

  constructor(opts: { dir: string; secrets: string[]; now?: () => Date }) {
    this.dir = opts.dir;
    this.redactor = new Redactor(opts.secrets);
    const now = opts.now ?? (() => new Date());
    this.logger = pino(
      {
        base: null,
        formatters: { level: (label) => ({ level: label }) },
        timestamp: () => `,"time":"${localIso((this.stamp = now()))}"`,
        // Fields are redacted as values before logging (that also hides secret-named keys); this
        // last pass over the finished line covers whatever a future field forgets to route there.
        hooks: { streamWrite: (line) => this.redactor.redact(line) },
      },
      { write: (line: string) => this.writeLine(line) },
    );
  }

  /** Records what the bus reports; returns a function that stops recording. */
  attach(bus: EventBus): () => void {
    const offs = [
      bus.on("tool.finished", (e) => this.safely(() => this.toolCall(e))),
      bus.on("llm.finished", (e) => this.safely(() => this.llmCall(e))),
      bus.on("warning", (e) => this.safely(() => this.logger.warn(this.redactor.redactValue({ kind: "warning", session: e.sessionId, message: e.message }) as object))),
      bus.on("message.finished", (e) => this.safely(() => this.message(e))),
    ];
    const detach = () => {
      offs.forEach((off) => off());
      this.detachers.delete(detach);
    };
    this.detachers.add(detach);
    return detach;
  }

  toolCall(rec: ToolAuditRecord): void {
    this.write({
      kind: "tool",
      session: rec.sessionId,
      callId: rec.callId,
      tool: rec.name,
      arguments: rec.arguments,
      status: rec.error === undefined ? "ok" : "error",
      attempts: rec.attempts,
      durationMs: rec.durationMs,
      // Redacted before the cut, so a secret straddling the cut cannot leave a readable prefix.
      result: kept(this.redactor.redact(rec.result)),
      error: rec.error,
    });
  }

  llmCall(rec: LlmAuditRecord): void {
    this.write({
      kind: "llm",
      session: rec.sessionId,
      model: rec.model,
      usage: rec.usage,
      durationMs: rec.durationMs,
      finishReason: rec.finishReason,
      attempts: rec.attempts,
      error: rec.error,
    });
  }

  message(rec: MessageAuditRecord): void {
    this.write({
      kind: "message",
      session: rec.sessionId,
      status: rec.status,
      iterations: rec.iterations,
      toolCalls: rec.toolCalls,
      usage: rec.usage,
      durationMs: rec.durationMs,
      error: rec.error,
    });
  }

  /** Stops recording bus events. Lines are written synchronously, so nothing is left to flush. */
  async close(): Promise<void> {
    [...this.detachers].forEach((detach) => detach());
  }

  /** Level "error" for a call that failed, so `grep '"level":"error"'` finds every failure. */
  private write(fields: { kind: string; error: string | undefined; [field: string]: unknown }): void {
    const line = this.redactor.redactValue(fields) as object;
    if (fields.error === undefined) this.logger.info(line);
    else this.logger.error(line);
  }

  /**
   * Opened per line: audit volume is small, and a file moved or deleted by hand is simply
   * recreated; so is the folder, once a write finds it gone.
   */
  private writeLine(line: string): void {
    const file = join(this.dir, `audit-${localDate(this.stamp)}.jsonl`);
    if (file !== this.knownFile) {
      mkdirSync(this.dir, { recursive: true });
      this.knownFile = file;
    }
    try {
      appendFileSync(file, line);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      mkdirSync(this.dir, { recursive: true });
      process.stderr.write(`countd: the audit log folder ${this.dir} was removed while countd was running; created it again\n`);
      appendFileSync(file, line);
    }
  }

  /** Bus listeners must not throw into the agent loop; a lost audit line is still reported. */
  private safely(write: () => void): void {
    try {
      write();
    } catch (err) {
      process.stderr.write(`countd: audit log write in ${this.dir} failed: ${(err as Error).message}\n`);
    }
  }
}
