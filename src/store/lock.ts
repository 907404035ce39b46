import { link, readFile, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";

export class LockHeld extends Error {
  override readonly name = "LockHeld";
}

/**
 * One daemon per state directory: lowdb has no inter-process lock. The lock file holds the pid;
 * a lock left by a process that no longer exists is taken over.
 */
export async function acquireLock(stateDir: string, pid = process.pid): Promise<() => Promise<void>> {
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
      const holder = Number.parseInt(await readFile(lock, "utf8").catch(() => ""), 10);
      if (Number.isInteger(holder) && holder !== pid && isAlive(holder)) {
        throw new LockHeld(`another countd (pid ${holder}) is already running with the state directory ${stateDir}`);
      }
      await unlink(lock).catch(() => {});
    }
    throw new LockHeld(`could not take the lock ${lock}: another countd keeps taking it`);
  } finally {
    await unlink(mine).catch(() => {});
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
