import { link, mkdir, open, rename, stat, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";

export class LockHeld extends Error {
  override readonly name = "LockHeld";
}

/**
 * One daemon per state directory: lowdb has no inter-process lock. The lock file holds the pid;
 * a lock left by a process that no longer exists is taken over.
 */
export async function acquireLock(stateDir: string, pid = process.pid): Promise<() => Promise<void>> {
  await mkdir(stateDir, { recursive: true });
  const lock = join(stateDir, "countd.lock");
  const mine = join(stateDir, `countd.lock.${pid}`);
  await writeFile(mine, `${pid}\n`);
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        // link() fails when the lock exists: of two daemons starting at once, exactly one wins.
        await link(mine, lock);
        return async () => {
          await unlink(lock).catch(() => {});
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const holder = await readHolder(lock);
      if (!holder) continue;
      if (Number.isInteger(holder.pid) && holder.pid > 0 && holder.pid !== pid && isAlive(holder.pid)) {
        throw new LockHeld(`another countd (pid ${holder.pid}) is already running with the state directory ${stateDir}`);
      }
      await removeStale(lock, holder.inode, pid);
    }
    throw new LockHeld(`could not take the lock ${lock}: another countd keeps taking it`);
  } finally {
    await unlink(mine).catch(() => {});
  }
}

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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
