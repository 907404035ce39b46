import { closeSync, fstatSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { ChatMessage } from "../providers/types.js";
import { sessionFileName } from "./file-names.js";
import { appendJsonLines, appendJsonLinesTo, createForAppending, readJsonLines } from "../store/jsonl.js";
import { KeyedQueue } from "../store/keyed-queue.js";

/** A line saying "the oldest n live messages are gone"; replayed in order on load. */
interface DropMarker {
  dropOldest: number;
  at: string;
}

/** A line saying "the messages up to the next marker are this run's"; loading skips it. */
export interface RunMarker {
  run: string;
  at: string;
}

const ROLES = new Set(["system", "user", "assistant", "tool"]);

function isMessage(v: unknown): v is ChatMessage {
  return typeof v === "object" && v !== null && ROLES.has((v as { role?: unknown }).role as string);
}

function isDropMarker(v: unknown): v is DropMarker {
  return typeof v === "object" && v !== null && typeof (v as DropMarker).dropOldest === "number";
}

/**
 * Where runs keep their conversations: the files below (SessionStore), or, where daemons share a
 * backend, the backend for the sessions of `session: shared` jobs, whose runs land on any node.
 */
export interface SessionHistory {
  load(sessionId: string): Promise<ChatMessage[]>;
  /** One run's (or message's) messages, appended as one block after everything already there. */
  append(sessionId: string, messages: ChatMessage[], runId?: string): Promise<void>;
  /** Drops the oldest `count` messages (overflow.ts summarised them first). */
  dropOldest(sessionId: string, count: number): Promise<void>;
  /**
   * A message on the session has begun and will append when it ends: a store may get ready now
   * (create a new session's file beside the message's LLM calls, not after them). `dismiss` when
   * the message ends without appending.
   */
  expect?(sessionId: string): void;
  dismiss?(sessionId: string): Promise<void>;
}

/** Sessions kept in memory; older ones are read from their files again when needed. */
export const SESSIONS_KEPT_IN_MEMORY = 100;

/**
 * Session transcripts as append-only JSONL, one file per session under `<stateDir>/sessions/`.
 * Dropping old messages appends a marker rather than rewriting, so a crash never loses the file.
 * The most recently used sessions stay in memory; a new store (a restart) reads the files again.
 */
export class SessionStore implements SessionHistory {
  readonly dir: string;
  /** In use order, oldest first: every isolated run has a session of its own, so all of them would grow without end. */
  private readonly live = new Map<string, ChatMessage[]>();
  private readonly queue = new KeyedQueue();
  /** New sessions' files, created by `expect` for the append to come (undefined: the file was there). */
  private readonly ahead = new Map<string, Promise<number | undefined>>();

  constructor(stateDir: string) {
    this.dir = join(stateDir, "sessions");
  }

  fileOf(sessionId: string): string {
    return join(this.dir, sessionFileName(sessionId));
  }

  load(sessionId: string): Promise<ChatMessage[]> {
    return this.queue.run(sessionId, async () => [...(await this.messages(sessionId))]);
  }

  /** `runId`: the messages are that run's; a marker line before them says so (RunMarker). */
  append(sessionId: string, messages: ChatMessage[], runId?: string): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    return this.queue.run(sessionId, async () => {
      const live = await this.messages(sessionId);
      const marker: RunMarker[] = runId === undefined ? [] : [{ run: runId, at: new Date().toISOString() }];
      const file = this.fileOf(sessionId);
      const fd = await this.takeAhead(sessionId);
      await (fd === undefined ? appendJsonLines(file, [...marker, ...messages]) : appendJsonLinesTo(fd, file, [...marker, ...messages]));
      live.push(...messages);
    });
  }

  /**
   * Every isolated run's session is new, and creating its file took longer than writing it:
   * the file is created here, as the message starts, so its end waits for the write alone.
   */
  expect(sessionId: string): void {
    if (this.ahead.has(sessionId)) return;
    const fd = createForAppending(this.fileOf(sessionId)).catch(() => undefined);
    this.ahead.set(sessionId, fd);
  }

  /** The message ended without appending (it waits for a person's yes): a file it created and left empty goes. */
  dismiss(sessionId: string): Promise<void> {
    return this.queue.run(sessionId, async () => {
      const fd = await this.takeAhead(sessionId);
      if (fd === undefined) return;
      try {
        const held = fstatSync(fd);
        const named = statSync(this.fileOf(sessionId), { throwIfNoEntry: false });
        if (held.size === 0 && named?.ino === held.ino && named.dev === held.dev) unlinkSync(this.fileOf(sessionId));
      } finally {
        closeSync(fd);
      }
    });
  }

  private async takeAhead(sessionId: string): Promise<number | undefined> {
    const fd = this.ahead.get(sessionId);
    this.ahead.delete(sessionId);
    return fd;
  }

  dropOldest(sessionId: string, count: number): Promise<void> {
    return this.queue.run(sessionId, async () => {
      const live = await this.messages(sessionId);
      const n = Math.min(Math.max(0, Math.floor(count)), live.length);
      if (n === 0) return;
      const marker: DropMarker = { dropOldest: n, at: new Date().toISOString() };
      await appendJsonLines(this.fileOf(sessionId), [marker]);
      live.splice(0, n);
    });
  }

  private async messages(sessionId: string): Promise<ChatMessage[]> {
    let live = this.live.get(sessionId);
    if (!live) {
      live = [];
      // Every isolated run starts a session whose file is not there yet: it is looked for on the
      // main thread, without a trip through the thread pool, and not read.
      const file = this.fileOf(sessionId);
      const exists = statSync(file, { throwIfNoEntry: false }) !== undefined;
      for (const value of exists ? await readJsonLines(file) : []) {
        if (isMessage(value)) live.push(value);
        else if (isDropMarker(value)) live.splice(0, value.dropOldest);
      }
    }
    this.live.delete(sessionId);
    this.live.set(sessionId, live);
    if (this.live.size > SESSIONS_KEPT_IN_MEMORY) this.live.delete(this.live.keys().next().value!);
    return live;
  }
}
