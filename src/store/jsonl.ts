import { closeSync, constants, fdatasync as fdatasyncCallback, fstatSync, open, readSync, writeSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { promisify } from "node:util";
import { syncFolder } from "./durable.js";

/**
 * The parsed lines of an append-only JSONL file (none if it does not exist). A line that does not
 * parse is skipped: it is what a crash mid-write leaves, and the lines appended after it are good.
 */
export async function readJsonLines(path: string): Promise<unknown[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const values: unknown[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    try {
      values.push(JSON.parse(line));
    } catch {
      // a torn line: see above
    }
  }
  return values;
}

/** Records as JSON Lines: one line each, every line ended by a newline. */
export function toJsonLines(records: readonly unknown[]): string {
  return records.map((record) => `${JSON.stringify(record)}\n`).join("");
}

/**
 * Appends one line per record. When the file ends mid-line (a crash during the last write), a
 * newline goes first, so the torn line stays alone and the new records parse. Callers serialise
 * appends to one file (KeyedQueue): the end-of-file check and the write are not atomic together.
 *
 * Only the open (and a sync) goes through libuv's thread pool; the look at the last byte, the
 * write and the close are done on the main thread, where a small append takes microseconds,
 * while each step handed to the pool waited its turn there (0.1-0.2 ms apiece on a loaded 2-core
 * machine). Creating a file can take 0.15-0.3 ms of the file system's time, which the pool keeps
 * off the main thread, and lets a run's transcript and tool history be created side by side.
 *
 * A missing folder is created (also one removed while countd runs). `sync`: when this resolves the
 * records are on disk through a power cut: the data is synced (fdatasync), and so are the folders
 * holding the names of a file or folder the append may have created, since a new file is only as
 * durable as its name. "if new" syncs only an append that may have created the file, so that a
 * later synced append to it (which syncs the data alone) finds its name durable already.
 */
export async function appendJsonLines(path: string, records: readonly unknown[], opts: { sync?: "always" | "if new" } = {}): Promise<void> {
  const lines = toJsonLines(records);
  const { fd, created } = await openAppending(path);
  try {
    const { size } = writeLines(fd, fstatSync(fd).size, lines);
    if (opts.sync === "always" || (opts.sync === "if new" && size === 0)) {
      await fdatasync(fd);
      if (size === 0) await syncFolders(dirname(path), created === undefined ? dirname(path) : dirname(created));
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * A file created now for appends to come (O_EXCL: undefined when it is there already), its folder
 * made when missing: where creating a file is the costly part of an append, it can be done ahead,
 * beside other work, and `appendJsonLinesTo` then writes to it as appendJsonLines would.
 */
export async function createForAppending(path: string): Promise<number | undefined> {
  const flags = constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL;
  try {
    return (await openAppending(path, flags)).fd;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return undefined;
    throw err;
  }
}

/**
 * appendJsonLines (unsynced) through `fd`, a file createForAppending opened at `path`, closed after.
 * A file removed meanwhile (the state directory emptied) holds nothing any more: the records go
 * to a new one at `path`.
 */
export async function appendJsonLinesTo(fd: number, path: string, records: readonly unknown[]): Promise<void> {
  try {
    const { nlink, size } = fstatSync(fd);
    if (nlink > 0) return void writeLines(fd, size, toJsonLines(records));
  } finally {
    closeSync(fd);
  }
  await appendJsonLines(path, records);
}

/**
 * Writes `lines` at the end of a file `size` bytes long, after a newline when its last line is
 * torn; `whole`: the caller knows it is not (its own write left the file at `size`). `end`: the
 * file's size after.
 */
function writeLines(fd: number, size: number, lines: string, whole = false): { size: number; end: number } {
  let torn = false;
  if (size > 0 && !whole) {
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    torn = last[0] !== 0x0a;
  }
  const data = Buffer.from(torn ? "\n" + lines : lines);
  writeAll(fd, data);
  return { size, end: size + data.length };
}

/** All of `data` written through `fd` on the main thread: a short write is followed by the rest. */
export function writeAll(fd: number, data: Buffer): void {
  for (let written = 0; written < data.length;) written += writeSync(fd, data, written);
}

/**
 * Unsynced appends to a file that gets a line at a time, often (the spend ledger: one per LLM
 * call), with the file kept open between them: an open per append went through libuv's thread
 * pool every time, which cost a daemon-wired exchange of six calls more CPU than all its other
 * writes (bench/loop (c)). What appendJsonLines promises holds: a torn last line is ended first,
 * and a file (or its folder) removed meanwhile is created again, found by the held file having
 * no name left (one fstat per append, on the main thread like the write). One path is held at a
 * time; appends run in the order they were asked for.
 */
export class HeldAppends {
  /** `end`: the size the last write here left the file at, whose last line is then whole. */
  private held: { path: string; fd: number; end?: number } | undefined;
  private chain: Promise<void> = Promise.resolve();

  append(path: string, records: readonly unknown[]): Promise<void> {
    const done = this.chain.then(() => this.write(path, toJsonLines(records)));
    this.chain = done.catch(() => {});
    return done;
  }

  private async write(path: string, lines: string): Promise<void> {
    let stat = this.held?.path === path ? fstatSync(this.held.fd) : undefined;
    if (stat?.nlink === 0) stat = undefined;
    if (!stat) {
      this.release();
      const { fd } = await openAppending(path);
      this.held = { path, fd };
      stat = fstatSync(fd);
    }
    const held = this.held!;
    try {
      held.end = writeLines(held.fd, stat.size, lines, stat.size === held.end).end;
    } catch (err) {
      // A write that failed (a full disk) gets a fresh open next time rather than the same handle.
      this.release();
      throw err;
    }
  }

  private release(): void {
    if (this.held) closeSync(this.held.fd);
    this.held = undefined;
  }
}

const openFd = promisify(open);
const fdatasync = promisify(fdatasyncCallback);

/**
 * Opens `path` to append, creating its folder only when the open finds it missing: nearly every
 * append goes to a folder that exists, and a mkdir per append was a file operation for nothing.
 * `created`: the outermost folder made, whose own name its parent folder holds.
 */
async function openAppending(path: string, flags: string | number = "a+"): Promise<{ fd: number; created?: string }> {
  try {
    return { fd: await openFd(path, flags) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    const created = await mkdir(dirname(path), { recursive: true });
    return { fd: await openFd(path, flags), created };
  }
}

/** Syncs `from` and each folder above it up to `top`: each holds the name of the one below. */
async function syncFolders(from: string, top: string): Promise<void> {
  for (let dir = from; ; dir = dirname(dir)) {
    await syncFolder(dir);
    if (dir === top || dir === dirname(dir)) return;
  }
}
