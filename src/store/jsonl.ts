import { mkdir, open, readFile } from "node:fs/promises";
import { dirname } from "node:path";

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

/**
 * Appends one line per record. When the file ends mid-line (a crash during the last write), a
 * newline goes first, so the torn line stays alone and the new records parse. Callers serialise
 * appends to one file (KeyedQueue): the end-of-file check and the write are not atomic together.
 */
export async function appendJsonLines(path: string, records: unknown[]): Promise<void> {
  const lines = records.map((r) => JSON.stringify(r) + "\n").join("");
  await mkdir(dirname(path), { recursive: true });
  const file = await open(path, "a+");
  try {
    const { size } = await file.stat();
    let torn = false;
    if (size > 0) {
      const last = Buffer.alloc(1);
      await file.read(last, 0, 1, size - 1);
      torn = last[0] !== 0x0a;
    }
    await file.appendFile(torn ? "\n" + lines : lines);
  } finally {
    await file.close();
  }
}
