import { join } from "node:path";
import { adoptLegacyFile, sessionFileName } from "../sessions/file-names.js";
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

/** The tool-conversation history: append-only JSONL per session under `<stateDir>/tool-history/`, redacted. */
export class ToolHistory {
  readonly dir: string;
  private readonly queue = new KeyedQueue();

  constructor(
    stateDir: string,
    private readonly redactor: Redactor,
  ) {
    this.dir = join(stateDir, "tool-history");
  }

  record(rec: ToolHistoryInput): Promise<void> {
    const { at = new Date(), ...rest } = rec;
    const line = this.redactor.redactValue({ at: at.toISOString(), ...rest });
    return this.queue.run(rec.sessionId, async () => {
      await adoptLegacyFile(this.dir, rec.sessionId);
      await appendJsonLines(this.fileOf(rec.sessionId), [line]);
    });
  }

  /** Oldest first, including every record() already called. */
  read(sessionId: string): Promise<ToolHistoryRecord[]> {
    return this.queue.run(sessionId, async () => {
      await adoptLegacyFile(this.dir, sessionId);
      return (await readJsonLines(this.fileOf(sessionId))) as ToolHistoryRecord[];
    });
  }

  private fileOf(sessionId: string): string {
    return join(this.dir, sessionFileName(sessionId));
  }
}
