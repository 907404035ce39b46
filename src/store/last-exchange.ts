import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * When the user last talked to countd (`countd ask`): the heartbeat stays quiet for its idle
 * threshold after that. A file of its own, because `ask` runs beside the daemon, which owns
 * state.json.
 */
const FILE = "last-exchange";

export async function recordExchange(stateDir: string, at = new Date()): Promise<void> {
  const file = join(stateDir, FILE);
  await writeFile(`${file}.tmp`, `${at.toISOString()}\n`);
  await rename(`${file}.tmp`, file);
}

export async function lastExchange(stateDir: string): Promise<Date | undefined> {
  const text = await readFile(join(stateDir, FILE), "utf8").catch(() => "");
  const at = new Date(text.trim());
  return Number.isNaN(at.getTime()) ? undefined : at;
}
