import { join } from "node:path";
import { sessionFileName } from "../sessions/file-names.js";
import { appendJsonLines, readJsonLines } from "../store/jsonl.js";
import { KeyedQueue } from "../store/keyed-queue.js";
import type { Redactor } from "./redact.js";

/** One tool call in its conversation: what the user asked, what the tool got, what it returned. */
export interface ToolHistoryRecord {
  at: string;
  sessionId: string;
  toolName: string;
  arguments: unknown;
  userMessage: string;
  result: string;
  durationMs: number;
}

export interface ToolHistoryInput extends Omit<ToolHistoryRecord, "at"> {
  at?: Date;
}

/**
 * The tool-conversation history: append-only JSONL per session under `<stateDir>/tool-history/`,
 * redacted. Records are kept in memory until their session is flushed, which the agent loop does
 * when a message ends, and close() at shutdown: one append per run instead of one per tool call.
 * A crash loses the records of the runs in progress, as it loses their session transcripts.
 */
export class ToolHistory {
  readonly dir: string;
  private readonly queue = new KeyedQueue();
  /** Redacted records not yet flushed, by session. */
  private readonly pending = new Map<string, object[]>();

  constructor(
    stateDir: string,
    private readonly redactor: Redactor,
  ) {
    this.dir = join(stateDir, "tool-history");
  }

  record(rec: ToolHistoryInput): void {
    const { at = new Date(), ...rest } = rec;
    const line = this.redactor.redactValue({ at: at.toISOString(), ...rest }) as object;
    const pending = this.pending.get(rec.sessionId);
    if (pending) pending.push(line);
    else this.pending.set(rec.sessionId, [line]);
  }

  /** Appends the session's records so far in one write; resolves once they are in its file. */
  flush(sessionId: string): Promise<void> {
    return this.queue.run(sessionId, async () => {
      const lines = this.pending.get(sessionId);
      if (!lines) return;
      this.pending.delete(sessionId);
      try {
        await appendJsonLines(this.fileOf(sessionId), lines);
      } catch (err) {
        // Kept for the next flush, ahead of anything recorded meanwhile, so order holds.
        this.pending.set(sessionId, [...lines, ...(this.pending.get(sessionId) ?? [])]);
        throw err;
      }
    });
  }

  /** Flushes every session: at shutdown, so no record is left in memory. */
  async close(): Promise<void> {
    await Promise.all([...this.pending.keys()].map((sessionId) => this.flush(sessionId)));
  }

  /** Oldest first, including every record() already called. */
  async read(sessionId: string): Promise<ToolHistoryRecord[]> {
    await this.flush(sessionId);
    return this.queue.run(sessionId, async () => (await readJsonLines(this.fileOf(sessionId))) as ToolHistoryRecord[]);
  }

  private fileOf(sessionId: string): string {
    return join(this.dir, sessionFileName(sessionId));
  }
}
