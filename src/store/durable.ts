import { open, readFile, rename, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import type { Adapter } from "lowdb";

/** Makes temporary names unique within the process, so two writers never share one. */
let written = 0;

/** Syncs a folder's entries: a file renamed into it survives a power cut only once its folder is synced. */
export async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** `text` written to `file` and synced before it resolves; `flag` "wx" refuses a file that exists. */
export async function writeSynced(file: string, text: string, flag: "w" | "wx"): Promise<void> {
  const handle = await open(file, flag);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `file` with `text` so that after a crash or a power cut it holds either the old text
 * or the new one, whole: a temporary file is written and synced, renamed over `file`, and the
 * folder synced. Rename alone is atomic for a crash but not for a power cut, where the kernel
 * may not yet have written the new file's blocks, or the rename itself.
 */
export async function writeFileDurably(file: string, text: string): Promise<void> {
  const temp = `${file}.${process.pid}-${++written}.tmp`;
  try {
    await writeSynced(temp, text, "w");
    await rename(temp, file);
  } catch (err) {
    await unlink(temp).catch(() => {});
    throw err;
  }
  await syncFolder(dirname(file));
}

/**
 * lowdb's JSON file, written through writeFileDurably: lowdb's own JSONFile writes through steno,
 * which renames without syncing. Like steno, one write at a time, and writes asked for meanwhile
 * share the next one, which saves the newest data: a write resolves once data at least as new
 * as its own is on disk. The data is serialised when its write begins, not at each call: a
 * thousand runs starting at once each index themselves in state.json, and serialising the whole
 * index at every call cost time growing with the square of the runs.
 */
export class DurableJSONFile<T> implements Adapter<T> {
  private chain: Promise<void> = Promise.resolve();
  /** The newest data asked to be written and not yet taken by a write; its text when a write of it failed. */
  private newest: { data: T } | { text: string } | undefined;

  constructor(private readonly file: string) {}

  async read(): Promise<T | null> {
    try {
      return JSON.parse(await readFile(this.file, "utf8")) as T;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  }

  write(data: T): Promise<void> {
    this.newest = { data };
    const write = this.chain.then(async () => {
      const newest = this.newest;
      if (newest === undefined) return;
      this.newest = undefined;
      const text = "text" in newest ? newest.text : JSON.stringify(newest.data, null, 2);
      try {
        await writeFileDurably(this.file, text);
      } catch (err) {
        // Left for the next write to take, so a later caller is not told its data is on disk.
        this.newest ??= { text };
        throw err;
      }
    });
    this.chain = write.catch(() => {});
    return write;
  }
}
