import { link, mkdir, open, realpath, rename, stat, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { takeKernelLock } from "./kernel-lock.js";

export class LockHeld extends Error {
  override readonly name = "LockHeld";
}

/** How often a daemon looks at its lock file. */
const WATCH_EVERY_MS = 2_000;

export interface LockWatch {
  log: Logger;
  /** Another live process put its pid in the lock file: the holder must stop. Called at most once. */
  onTaken: (problem: string) => void;
}

/**
 * One countd per state directory: lowdb has no inter-process lock. What decides is the kernel
 * lock (kernel-lock.ts), held until release or until the process ends, which a removed or edited
 * file cannot free. The lock file countd.lock names the holder's pid for people and `countd
 * status`, and still refuses a start while it names a live process (a countd the kernel lock does
 * not reach, in another network namespace); one left by a process that no longer exists is taken
 * over.
 *
 * With `watch` (the daemon, which holds the lock for months) the file is looked at every 2 s:
 * removed, emptied or naming a process that no longer exists, it is written again, since this
 * process still holds the kernel lock; naming another live process, `watch.onTaken` is called and
 * the file is left to that process.
 */
export async function acquireLock(stateDir: string, pid = process.pid, watch?: LockWatch): Promise<() => Promise<void>> {
  await mkdir(stateDir, { recursive: true });
  const kernel = await takeKernelLock(await realpath(stateDir), pid);
  if (!kernel.held) {
    const holder = kernel.holderPid === undefined ? "another countd" : `another countd (pid ${kernel.holderPid})`;
    throw new LockHeld(`${holder} is already running with the state directory ${stateDir}`);
  }
  const lock = join(stateDir, "countd.lock");
  try {
    await takeLockFile(stateDir, lock, pid);
  } catch (err) {
    await kernel.release();
    throw err;
  }
  const stopWatching = watch ? watchLockFile(stateDir, lock, pid, watch) : () => {};
  return async () => {
    stopWatching();
    // A file another process took is that process's to remove.
    if ((await readHolder(lock).catch(() => undefined))?.pid === pid) await unlink(lock).catch(() => {});
    await kernel.release();
  };
}

async function takeLockFile(stateDir: string, lock: string, pid: number): Promise<void> {
  const mine = join(stateDir, `countd.lock.${pid}`);
  await writeFile(mine, `${pid}\n`);
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        // link() fails when the lock exists: of two daemons starting at once, exactly one wins.
        await link(mine, lock);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const holder = await readHolder(lock);
      if (!holder) continue;
      if (isLiveOther(holder.pid, pid)) {
        throw new LockHeld(`another countd (pid ${holder.pid}) is already running with the state directory ${stateDir}`);
      }
      await removeStale(lock, holder.inode, pid);
    }
    throw new LockHeld(`could not take the lock ${lock}: another countd keeps taking it`);
  } finally {
    await unlink(mine).catch(() => {});
  }
}

function watchLockFile(stateDir: string, lock: string, pid: number, watch: LockWatch): () => void {
  const log = watch.log.child({ component: "lock" });
  let looking = false;
  /** What the last look could not do: a state directory that stays unusable is one line, not one every 2 s. */
  let failing: string | undefined;
  const look = async () => {
    const holder = await readHolder(lock);
    if (holder?.pid === pid) return;
    if (holder && isLiveOther(holder.pid, pid)) {
      clearInterval(timer);
      watch.onTaken(`the lock file ${lock} now names pid ${holder.pid}: another process took the state directory ${stateDir}`);
      return;
    }
    // The folder may have gone with the file.
    await mkdir(stateDir, { recursive: true });
    await takeLockFile(stateDir, lock, pid);
    // Not `pid`: pino-pretty hides that field at a terminal.
    if (holder)
      log.warn(
        { lock, daemonPid: pid },
        "the lock file no longer named this countd; this countd still holds the state directory and wrote it again",
      );
    else
      log.warn(
        { lock },
        "the lock file was removed while countd was running; this countd still holds the state directory and wrote it again",
      );
  };
  const timer = setInterval(() => {
    if (looking) return;
    looking = true;
    look()
      .then(() => (failing = undefined))
      .catch((err: unknown) => {
        if (err instanceof LockHeld) {
          clearInterval(timer);
          watch.onTaken(`${err.message}: another process took the lock file ${lock}`);
          return;
        }
        const problem = (err as Error).message;
        if (problem !== failing) log.warn({ lock, error: problem }, "could not check the lock file");
        failing = problem;
      })
      .finally(() => (looking = false));
  }, WATCH_EVERY_MS).unref();
  return () => clearInterval(timer);
}

const isLiveOther = (holder: number, pid: number) => Number.isInteger(holder) && holder > 0 && holder !== pid && isAlive(holder);

async function readHolder(lock: string): Promise<{ pid: number; inode: number } | undefined> {
  const handle = await open(lock, "r").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (!handle) return undefined;
  try {
    const { ino } = await handle.stat();
    return { pid: Number.parseInt(await handle.readFile("utf8"), 10), inode: ino };
  } finally {
    await handle.close();
  }
}

/**
 * Removes the stale lock only if it is still the file that was read: two daemons taking over
 * the same stale lock would otherwise each delete the other's fresh one, and both would run.
 * rename() moves whatever is there in one step; a fresh lock moved by mistake is put back.
 */
async function removeStale(lock: string, inode: number, pid: number): Promise<void> {
  const aside = `${lock}.stale.${pid}`;
  try {
    await rename(lock, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if ((await stat(aside)).ino !== inode) await link(aside, lock).catch(() => {});
  await unlink(aside);
}

/** Whether a process with this pid exists (EPERM: it does, under another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
