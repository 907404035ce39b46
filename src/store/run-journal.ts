import { createHash } from "node:crypto";
import { closeSync, open as openCallback } from "node:fs";
import { mkdir, readFile, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Redactor } from "../audit/redact.js";
import { silentLogger, type Logger } from "../log.js";
import { errorText } from "../text.js";
import { JOURNAL_VERSION, journalEntry, type JournalEntry, type JournalInput, type JournalWriter } from "./journal-entries.js";
import { writeAll } from "./jsonl.js";
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
  /** Lets go of what the sink holds open, once the last append is done. */
  release(): void;
}

/** An entry waits at most this long in memory before it is appended, as the audit log's lines do. */
export const JOURNAL_FLUSH_MS = 1_000;

/**
 * One run's journal as it is written: each entry redacted, stamped and kept in order, then
 * appended in one write within JOURNAL_FLUSH_MS of the first entry waiting, or at `close`, which
 * waits for what is left: a run of a few seconds takes one write. Not synced: like a session, a
 * crash may take the last second's entries of a run in progress.
 */
export class RunJournal implements JournalWriter {
  private chain: Promise<void> = Promise.resolve();
  private lines: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private failed = false;

  constructor(
    private readonly sink: JournalSink,
    private readonly redactor: Redactor,
    private readonly log: Logger = silentLogger,
  ) {}

  write(entry: JournalInput, sub?: string): void {
    const line = { v: JOURNAL_VERSION, at: new Date().toISOString(), ...(sub !== undefined ? { sub } : {}), ...entry };
    this.lines.push(`${JSON.stringify(this.redactor.redactStrings(line))}\n`);
    this.timer ??= setTimeout(() => this.flush(), JOURNAL_FLUSH_MS).unref();
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
  async close(): Promise<void> {
    this.flush();
    await this.chain;
    this.sink.release();
  }

  /** Appends every entry waiting, behind the writes already on their way. */
  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lines.length === 0) return;
    const text = this.lines.splice(0).join("");
    this.then(() => this.sink.append(text));
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
  // Opened as the run starts, so the write at its end is the only one the run waits for.
  let fd: Promise<number> | undefined = openFor(join(state, JOURNAL_DIR, job), file);
  // Unhandled until the first append asks for it: that append says what went wrong.
  fd.catch(() => {});
  return {
    async append(text) {
      const reopen = () => (fd = openFor(join(state, JOURNAL_DIR, job), file));
      // Opened at the start while its folder was away (the state directory emptied): opened again now.
      const opened = await (fd ?? reopen()).catch(reopen);
      // Written on the main thread, where a run's few kilobytes take microseconds: a write handed to
      // libuv's thread pool waited its turn there, and the run's end waited for it.
      writeAll(opened, Buffer.from(text));
    },
    release() {
      const held = fd;
      fd = undefined;
      void held?.then((opened) => closeSync(opened)).catch(() => {});
    },
    async blob(hash, text) {
      const path = blobFile(state, hash);
      const since = Date.now() - TOUCH_EVERY_MS;
      if ((touched.get(path) ?? -Infinity) > since) return;
      // Only the last hour's are worth remembering: the map stays as small as an hour's prompts.
      if (touched.size >= TOUCHED_KEPT) for (const [known, at] of touched) if (at <= since) touched.delete(known);
      touched.set(path, Date.now());
      try {
        await inDir(join(state, JOURNAL_DIR, BLOBS_DIR), () => writeFile(path, text, { flag: "wx" }));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        const now = new Date();
        await utimes(path, now, now);
      }
    },
  };
}

/** The folders this process made: a run's write does not ask for its folder again. */
const made = new Set<string>();

const openFd = promisify(openCallback);

/** `file` opened for appending, in `dir` (inDir): a plain descriptor, which costs less to make and close than a FileHandle. */
async function openFor(dir: string, file: string): Promise<number> {
  let opened: number | undefined;
  await inDir(dir, async () => {
    opened = await openFd(file, "a");
  });
  return opened!;
}

/** `write` in `dir`, made first unless this process made it; made again if it was removed meanwhile (the state directory emptied). */
async function inDir(dir: string, write: () => Promise<void>): Promise<void> {
  if (!made.has(dir)) {
    await mkdir(dir, { recursive: true });
    made.add(dir);
  }
  try {
    await write();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    made.delete(dir);
    await mkdir(dir, { recursive: true });
    made.add(dir);
    await write();
  }
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
