import { createHash } from "node:crypto";
import { appendFile, mkdir, readFile, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Redactor } from "../audit/redact.js";
import { silentLogger, type Logger } from "../log.js";
import { errorText } from "../text.js";
import { JOURNAL_VERSION, journalEntry, type JournalEntry, type JournalInput, type JournalWriter } from "./journal-entries.js";
import { problemOf, quarantine, type Misfit } from "./quarantine.js";

/** Under the state directory: `journal/<job>/<run id>.jsonl`, and the texts kept once in `journal/blobs/<sha256>`. */
export const JOURNAL_DIR = "journal";
export const BLOBS_DIR = "blobs";

export const journalFile = (state: string, job: string, runId: string) => join(state, JOURNAL_DIR, job, `${runId}.jsonl`);
export const blobFile = (state: string, hash: string) => join(state, JOURNAL_DIR, BLOBS_DIR, hash);

/** Where a journal's lines and blobs go. */
export interface JournalSink {
  append(text: string): Promise<void>;
  blob(hash: string, text: string): Promise<void>;
}

/**
 * One run's journal as it is written: each entry redacted, stamped and appended in order behind
 * the run (the run never waits on a write); the entries that come while a write is on its way go
 * in the next one together. `close` waits for what is left. Not synced: like a session, a crash
 * may take the last entries of a run in progress.
 */
export class RunJournal implements JournalWriter {
  private chain: Promise<void> = Promise.resolve();
  private lines: string[] = [];
  private failed = false;

  constructor(
    private readonly sink: JournalSink,
    private readonly redactor: Redactor,
    private readonly log: Logger = silentLogger,
  ) {}

  write(entry: JournalInput, sub?: string): void {
    const line = { v: JOURNAL_VERSION, at: new Date().toISOString(), ...(sub !== undefined ? { sub } : {}), ...entry };
    // The first line waiting queues the write that takes every line waiting by the time it runs.
    if (this.lines.push(`${JSON.stringify(this.redactor.redactStrings(line))}\n`) === 1) {
      this.then(() => this.sink.append(this.lines.splice(0).join("")));
    }
  }

  blob(text: string): string {
    const safe = this.redactor.redact(text);
    const hash = createHash("sha256").update(safe).digest("hex");
    this.then(() => this.sink.blob(hash, safe));
    return hash;
  }

  nested(sub: string): JournalWriter {
    return {
      write: (entry) => this.write(entry, sub),
      blob: (text) => this.blob(text),
      nested: (deeper) => this.nested(`${sub}/${deeper}`),
    };
  }

  /** Once every entry written so far is where it goes. */
  close(): Promise<void> {
    return this.chain;
  }

  private then(step: () => Promise<void>): void {
    this.chain = this.chain.then(step).catch((err: unknown) => {
      // Once per run: a full disk would otherwise log every entry.
      if (this.failed) return;
      this.failed = true;
      this.log.warn({ error: errorText(err) }, "could not write the run's journal; countd show will say it is incomplete");
    });
  }
}

/** A blob used again within this long is not touched again: retention counts in days. */
const TOUCH_EVERY_MS = 60 * 60_000;
/** The blobs remembered before the ones not used within TOUCH_EVERY_MS are forgotten. */
const TOUCHED_KEPT = 1_000;

/**
 * The sink of a run's journal in the state directory. A blob already there is touched, so
 * retention keeps it while runs use it; `touched` (shared by a process's runs) says when each was
 * last written or touched, so a system prompt every run uses costs no write at each run.
 */
export function fileSink(state: string, job: string, runId: string, touched = new Map<string, number>()): JournalSink {
  const file = journalFile(state, job, runId);
  let made: Promise<unknown> | undefined;
  return {
    async append(text) {
      await (made ??= mkdir(join(state, JOURNAL_DIR, job), { recursive: true }));
      await appendFile(file, text);
    },
    async blob(hash, text) {
      const path = blobFile(state, hash);
      const since = Date.now() - TOUCH_EVERY_MS;
      if ((touched.get(path) ?? -Infinity) > since) return;
      // Only the last hour's are worth remembering: the map stays as small as an hour's prompts.
      if (touched.size >= TOUCHED_KEPT) for (const [known, at] of touched) if (at <= since) touched.delete(known);
      touched.set(path, Date.now());
      await mkdir(join(state, JOURNAL_DIR, BLOBS_DIR), { recursive: true });
      try {
        await writeFile(path, text, { flag: "wx" });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        const now = new Date();
        await utimes(path, now, now);
      }
    },
  };
}

/** A journal as read back: its entries that fit, the texts they reference, and what could not be used. */
export interface ReadJournal {
  entries: JournalEntry[];
  blobs: Map<string, string>;
  /** Lines that do not fit the format (moved to the quarantine file when read from files), and blobs not found. */
  problems: string[];
}

/** Checks a journal's lines against the format; `where` names the source for the messages. */
export function fitLines(lines: readonly string[], where: string): { entries: JournalEntry[]; misfits: Misfit[] } {
  const entries: JournalEntry[] = [];
  const misfits: Misfit[] = [];
  lines.forEach((text, index) => {
    if (text.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      misfits.push({ file: where, where: `line ${index + 1}`, problem: "not JSON", value: text });
      return;
    }
    const parsed = journalEntry.safeParse(value);
    if (parsed.success) entries.push(parsed.data);
    else misfits.push({ file: where, where: `line ${index + 1}`, problem: problemOf(parsed.error), value });
  });
  return { entries, misfits };
}

/** The hashes a journal's entries reference. */
export function blobsOf(entries: readonly JournalEntry[]): string[] {
  return [...new Set(entries.flatMap((entry) => (entry.kind === "prompt" ? [entry.user, ...(entry.system ? [entry.system] : [])] : [])))];
}

/**
 * How a journal is read: `moveAside` by the daemon alone, which owns the state directory (the
 * read-only commands beside it write nothing), with its logger.
 */
export interface JournalReading {
  log?: Logger;
  moveAside?: boolean;
}

/**
 * A run's journal from the state directory; undefined when it has none. With `moveAside`, lines
 * that do not fit are moved to the quarantine file once the run has ended (its end entry written),
 * so a later read does not report them again; a run in progress is still being appended to and is
 * left as it is.
 */
export async function readJournalFile(
  state: string,
  job: string,
  runId: string,
  { log, moveAside = false }: JournalReading = {},
): Promise<ReadJournal | undefined> {
  const file = journalFile(state, job, runId);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const lines = text.split("\n");
  const { entries, misfits } = fitLines(lines, file);
  if (moveAside && misfits.length > 0 && entries.some((entry) => entry.kind === "end")) {
    await quarantine(state, misfits, log);
    const bad = new Set(misfits.map((misfit) => Number(misfit.where.slice("line ".length)) - 1));
    await writeFile(file, lines.filter((_, index) => !bad.has(index)).join("\n"));
  }
  const blobs = new Map<string, string>();
  const problems = misfits.map((misfit) => `${misfit.file} ${misfit.where}: ${misfit.problem}`);
  for (const hash of blobsOf(entries)) {
    try {
      blobs.set(hash, await readFile(blobFile(state, hash), "utf8"));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      problems.push(`the text ${hash} it references is gone from ${join(state, JOURNAL_DIR, BLOBS_DIR)}`);
    }
  }
  return { entries, blobs, problems };
}
