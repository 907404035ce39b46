import { closeSync, fstatSync, mkdirSync, open, readSync, statSync, writeSync } from "node:fs";
import { promisify } from "node:util";
import { dirname } from "node:path";

/**
 * Appends one JSON line per record to a session's file (a transcript or its tool history): the
 * open goes through the thread pool, the rest (a look at the last byte, the write, the close) is
 * done on the main thread. These files take one small append when a message ends, and each step
 * handed to the thread pool waited its turn there (0.1-0.2 ms apiece on a loaded 2-core machine);
 * only the open is worth handing over, since creating a file (a new one for every isolated run)
 * can take 0.15-0.3 ms of the file system's time, and a run's transcript and its tool history are
 * created side by side. Nothing is synced: a crash may lose a run's transcript, as before.
 *
 * As in store/jsonl.ts, a file ending mid-line (a crash during the last write) gets a newline
 * first, so the torn line stays alone, and a missing folder (also one removed while countd runs)
 * is created. Callers serialise appends to one file (KeyedQueue), as the open is not atomic with
 * the look at its end.
 */
export async function appendLines(path: string, records: unknown[]): Promise<void> {
  const lines = records.map((r) => JSON.stringify(r) + "\n").join("");
  const fd = await openAppending(path);
  try {
    const { size } = fstatSync(fd);
    let torn = false;
    if (size > 0) {
      const last = Buffer.alloc(1);
      readSync(fd, last, 0, 1, size - 1);
      torn = last[0] !== 0x0a;
    }
    const data = Buffer.from(torn ? "\n" + lines : lines);
    for (let written = 0; written < data.length; ) written += writeSync(fd, data, written);
  } finally {
    closeSync(fd);
  }
}

/** Whether a file is there, without a trip through the thread pool: most session files a run asks for are not. */
export function fileExists(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false }) !== undefined;
}

const openFd = promisify(open);

async function openAppending(path: string): Promise<number> {
  try {
    return await openFd(path, "a+");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    mkdirSync(dirname(path), { recursive: true });
    return await openFd(path, "a+");
  }
}
