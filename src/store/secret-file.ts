import { chmod, open, readFile, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { syncFolder } from "./durable.js";

/**
 * Reads a secret kept in a file of the state directory, or creates it with `made` (mode 0600,
 * never overwriting one another process made at the same moment). A file others can read is
 * narrowed to 0600: whoever holds the secret holds what it grants. `synced`: the new file and its
 * folder reach the disk before it is used, for a secret already handed out must outlive a power cut.
 */
export async function readOrCreateSecret(file: string, made: string, { synced }: { synced: boolean }): Promise<string> {
  try {
    const handle = await open(file, "wx", 0o600);
    try {
      await handle.writeFile(`${made}\n`);
      if (synced) await handle.sync();
    } finally {
      await handle.close();
    }
    if (synced) await syncFolder(dirname(file));
    return made;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, 0o600);
  return (await readFile(file, "utf8")).trim();
}
