import { fstatSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
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

/**
 * The longest a line waits in memory: lines are handed to the file at the end of each message
 * (one write per run, not one per line), and a long run's lines at least this often.
 */
const AUDIT_FLUSH_MS = 1_000;

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

type Destination = ReturnType<typeof pino.destination>;

/** The day's file as it was opened: a path that no longer leads to this inode was removed or replaced. */
interface OpenFile {
  file: string;
  fd: number;
  stream: Destination;
  dev: number;
  ino: number;
}

/**
 * The audit trail: one JSON line per tool call, LLM call and finished message, in
 * `<dir>/audit-YYYY-MM-DD.jsonl` (a new file each local day). Every line passes through the
 * Redactor, so no known secret reaches disk. Lines gather in memory and are handed, together, to
 * pino's SonicBoom destination when a message ends, AUDIT_FLUSH_MS after the first of them, when
 * the day changes and at close(), which resolves once they are all in their files and synced. The
 * destination writes them at once, on the main thread: a message's few kilobytes take microseconds
 * there, where a write handed to libuv's thread pool cost the main thread more than that to ask.
 * A process that exits without close() (a second SIGTERM, an uncaught error) writes what is left
 * synchronously on exit. A SIGKILL or a power cut can lose the lines of the last second.
 */
export class AuditLog {
  private readonly dir: string;
  private readonly redactor: Redactor;
  private readonly logger: Logger;
  /** The time pino stamped on the line being written; it also picks the file. */
  private stamp = new Date(0);
  private current: OpenFile | undefined;
  /** Lines not yet handed to the file, all for `pendingFile`. */
  private pending = "";
  private pendingFile = "";
  private flushTimer: NodeJS.Timeout | undefined;
  /** Streams ending: their lines are still being written. */
  private readonly ending = new Set<Promise<void>>();
  private readonly detachers = new Set<() => void>();
  private readonly writeLeftAtExit = () => {
    const current = this.current;
    if (!current) return;
    try {
      // What the stream holds is older than what is pending here, so it goes first.
      current.stream.flushSync();
      if (this.pending !== "" && this.pendingFile === current.file) writeSync(current.fd, this.pending);
    } catch {
      // Exiting anyway; nothing is left to report to.
    }
  };

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
      bus.on("warning", (e) =>
        this.safely(() =>
          this.logger.warn(this.redactor.redactValue({ kind: "warning", session: e.sessionId, message: e.message }) as object),
        ),
      ),
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
      server: rec.server,
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
      cost: rec.cost,
      durationMs: rec.durationMs,
      finishReason: rec.finishReason,
      attempts: rec.attempts,
      error: rec.error,
    });
  }

  /** The last line of a message: its lines go to the file now. */
  message(rec: MessageAuditRecord): void {
    this.write({
      kind: "message",
      session: rec.sessionId,
      status: rec.status,
      iterations: rec.iterations,
      toolCalls: rec.toolCalls,
      usage: rec.usage,
      cost: rec.cost,
      durationMs: rec.durationMs,
      error: rec.error,
    });
    this.flush();
  }

  /** Stops recording bus events; resolves once every line written so far is in its file, synced. */
  async close(): Promise<void> {
    [...this.detachers].forEach((detach) => detach());
    this.safely(() => this.flush());
    process.off("exit", this.writeLeftAtExit);
    if (this.current) this.end(this.current);
    this.current = undefined;
    await Promise.all(this.ending);
  }

  /** Level "error" for a call that failed, so `grep '"level":"error"'` finds every failure. */
  private write(fields: { kind: string; error: string | undefined; [field: string]: unknown }): void {
    const line = this.redactor.redactValue(fields) as object;
    if (fields.error === undefined) this.logger.info(line);
    else this.logger.error(line);
  }

  private writeLine(line: string): void {
    const file = join(this.dir, `audit-${localDate(this.stamp)}.jsonl`);
    // The day's lines go to the day's file.
    if (file !== this.pendingFile) this.flush();
    this.pendingFile = file;
    this.pending += line;
    // The first line opens the file at once, so a folder that cannot be used is reported at once.
    if (this.current === undefined) this.flush();
    else this.flushTimer ??= setTimeout(() => this.safely(() => this.flush()), AUDIT_FLUSH_MS).unref();
  }

  /**
   * Hands the pending lines to the file's stream, after checking with one stat that the path still
   * leads to the file being written: a file moved or deleted by hand is simply recreated, and so is
   * the folder, once a flush finds it gone. Checked right before the hand-over, so the lines held
   * here go to the new file; lines whose write was under way as the file went go with it.
   */
  private flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const text = this.pending;
    const file = this.pendingFile;
    this.pending = "";
    if (text === "") return;
    let current = this.current;
    if (current?.file !== file || !leadsTo(file, current)) current = this.open(file);
    current.stream.write(text);
  }

  private open(file: string): OpenFile {
    const previous = this.current;
    if (previous) this.end(previous);
    this.current = undefined;
    if (previous?.file !== file) mkdirSync(this.dir, { recursive: true });
    let fd: number;
    try {
      fd = openSync(file, "a");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      mkdirSync(this.dir, { recursive: true });
      process.stderr.write(`countd: the audit log folder ${this.dir} was removed while countd was running; created it again\n`);
      fd = openSync(file, "a");
    }
    const { dev, ino } = fstatSync(fd);
    const stream = pino.destination({ fd, sync: true });
    stream.on("error", (err: Error) => process.stderr.write(`countd: audit log write in ${this.dir} failed: ${err.message}\n`));
    // Once per log, however often it reopens: a listener per file would pile up on process.
    if (process.listeners("exit").indexOf(this.writeLeftAtExit) === -1) process.on("exit", this.writeLeftAtExit);
    return (this.current = { file, fd, stream, dev, ino });
  }

  /** Lets a stream write what it holds, sync and close; close() waits for it. */
  private end({ stream }: OpenFile): void {
    const ended = new Promise<void>((done) => {
      stream.once("close", done);
      stream.once("error", () => done());
    });
    this.ending.add(ended);
    void ended.then(() => this.ending.delete(ended));
    stream.end();
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

function leadsTo(file: string, open: OpenFile): boolean {
  const seen = statSync(file, { throwIfNoEntry: false });
  return seen !== undefined && seen.ino === open.ino && seen.dev === open.dev;
}
