import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { silentLogger, type Logger } from "../log.js";

/**
 * At start-up: `dir` exists (it is created if missing) and a file can be written in it. Checked
 * before anything else is written there, so a daemon that could not record its runs or its audit
 * trail stops with one line naming the folder instead of starting and losing them.
 */
export async function ensureWritableDir(dir: string, what: string): Promise<void> {
  const probe = join(dir, `.countd-write-check.${process.pid}`);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(probe, "");
    await rm(probe, { force: true });
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    if (code === "EEXIST" || code === "ENOTDIR")
      throw new Error(`the ${what} directory ${dir} is not a directory (a file is in its place)`);
    throw new Error(`the ${what} directory ${dir} is not writable: ${message}`);
  }
}

/**
 * Runs a write in `dir`; if the folder has vanished (removed by hand, a cleanup script), it is
 * created again, the removal logged, and the write tried once more. Other failures are the
 * caller's: they need a person, not a new folder. `log` is the writing store's child logger.
 */
export async function inRecreatedDir<T>(dir: string, write: () => Promise<T>, log: Logger = silentLogger): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await mkdir(dir, { recursive: true });
    log.error({ dir }, "the folder was removed while countd was running; created it again");
    return write();
  }
}
