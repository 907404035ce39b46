import { constants, fstatSync } from "node:fs";
import { mkdir, open, readFile, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { silentLogger, type Logger } from "../log.js";
import { writeFileDurably } from "./durable.js";
import { GroupCommit } from "./group-commit.js";
import { toJsonLines } from "./jsonl.js";
import { inRecreatedDir } from "./writable-dir.js";

/**
 * Appending with O_DSYNC makes each write return once its data is on disk: one system call per
 * batch where write then fdatasync would take two trips through libuv's thread pool.
 */
const APPEND_SYNCED = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_DSYNC;

/** One line of the journal as read back: its JSON value, or the text of a line that is no JSON. */
export type JournalLine = { line: number; value: unknown } | { line: number; broken: string };

export interface JournalRead {
  lines: JournalLine[];
  bytes: number;
  /** Where the whole lines end: short of `bytes` when the last line was cut short. */
  wholeBytes: number;
  /** The last line is whole but has no newline. */
  unterminated: boolean;
  /** The last line, cut short by a crash: not in `lines`. */
  torn?: { line: number; bytes: number };
}

/** Reads a journal's lines; a missing file has none. A last line that is no JSON was cut short by a crash. */
export async function readJournal(file: string): Promise<JournalRead> {
  let buffer: Buffer;
  try {
    buffer = await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
    buffer = Buffer.alloc(0);
  }
  const read: JournalRead = { lines: [], bytes: buffer.length, wholeBytes: 0, unterminated: false };
  let start = 0;
  for (let number = 1; start < buffer.length; number++) {
    const newline = buffer.indexOf(10, start);
    const end = newline === -1 ? buffer.length : newline;
    const text = buffer.toString("utf8", start, end);
    const lineStart = start;
    const last = newline === -1;
    start = last ? buffer.length : newline + 1;
    if (text === "") {
      read.wholeBytes = start;
      continue;
    }
    let line: JournalLine;
    try {
      line = { line: number, value: JSON.parse(text) };
    } catch {
      line = { line: number, broken: text };
    }
    if (last && "broken" in line) {
      read.torn = { line: number, bytes: end - lineStart };
      break;
    }
    read.lines.push(line);
    read.wholeBytes = start;
    read.unterminated = last;
  }
  return read;
}

/**
 * An append-only file of JSON lines, kept open, whose appends are group-committed: every line
 * appended while one synced write is in flight goes to disk with the next one, so a burst of changes
 * costs one sync per batch rather than one per change. `compact` replaces the whole file with a
 * snapshot (written and synced beside it, renamed, folder synced), after which appends go on in the new file.
 *
 * A crash can cut the last line short (its append was not yet synced, so it was never promised):
 * opening drops it, truncates the file to the last whole line and logs it. A write that fails
 * (disk full) leaves the file in doubt, and a file or folder removed while countd runs holds
 * nothing any more: both are repaired by a compaction on the next write, from what is in memory.
 */
export class Journal {
  private pending: string[] = [];
  private readonly commits = new GroupCommit(() => this.write());
  /** A snapshot is written instead of the pending lines: asked for, or the file is in doubt. */
  private compactWanted = false;
  /** The last write failed. */
  private failed = false;

  private constructor(
    readonly file: string,
    private handle: FileHandle,
    private readonly snapshot: () => readonly unknown[],
    private readonly log: Logger,
  ) {}

  /**
   * Opens (creating if missing) and reads `file`. `snapshot` gives the records the whole file holds
   * as the owner's state has them now, for compactions.
   */
  static async open(
    file: string,
    snapshot: () => readonly unknown[],
    parent: Logger = silentLogger,
  ): Promise<{ journal: Journal; lines: JournalLine[] }> {
    const log = parent.child({ component: "journal", file });
    await mkdir(dirname(file), { recursive: true });
    const read = await readJournal(file);
    if (read.torn) log.warn(read.torn, "dropped a record cut short by a crash: it was never synced, so nothing it said was promised");
    const handle = await open(file, APPEND_SYNCED);
    if (read.wholeBytes < read.bytes) {
      await handle.truncate(read.wholeBytes);
      await handle.datasync();
    } else if (read.unterminated) {
      // A last record whole but for its newline: the next append must not run into it.
      await handle.write("\n");
    }
    const journal = new Journal(file, handle, snapshot, log);
    return { journal, lines: read.lines };
  }

  /** The last write failed, and the next is a compaction from the owner's state. */
  get inDoubt(): boolean {
    return this.failed;
  }

  /** Appends one JSON line per record; resolves once they are synced. */
  append(records: readonly unknown[]): Promise<void> {
    this.pending.push(toJsonLines(records));
    return this.commits.request();
  }

  /** Replaces the file with the owner's snapshot; resolves once it is synced. */
  compact(): Promise<void> {
    this.compactWanted = true;
    return this.commits.request();
  }

  /** Waits for every write asked for so far, then closes the file. */
  async close(): Promise<void> {
    await this.commits.idle();
    await this.handle.close();
  }

  /** One synced write of every line appended since the last, or a compaction. */
  private async write(): Promise<void> {
    const text = this.pending.join("");
    this.pending = [];
    try {
      if (this.compactWanted) await this.rewrite();
      else {
        await this.handle.write(text);
        // What a removed file took is rewritten from memory at once.
        if (this.gone()) await this.rewrite();
      }
      this.failed = false;
    } catch (err) {
      this.compactWanted = true;
      this.failed = true;
      throw err;
    }
  }

  /**
   * Whether the file this handle writes has no name left: removed, its folder removed, or replaced
   * by a rename. An fstat on the main thread takes microseconds; a stat of the path through libuv's
   * thread pool cost each write a trip there (a sixth of the outbox's journal time in a profile).
   */
  private gone(): boolean {
    return fstatSync(this.handle.fd).nlink === 0;
  }

  private async rewrite(): Promise<void> {
    // Taken now, after every change so far: the lines pending until now are in it.
    const text = toJsonLines(this.snapshot());
    this.pending = [];
    await inRecreatedDir(dirname(this.file), () => writeFileDurably(this.file, text), this.log);
    const handle = await open(this.file, APPEND_SYNCED);
    await this.handle.close().catch(() => {});
    this.handle = handle;
    this.compactWanted = false;
  }
}
