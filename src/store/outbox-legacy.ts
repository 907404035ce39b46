import { access, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { writeFileDurably } from "./durable.js";
import { toJsonLines } from "./jsonl.js";
import { disabledShape, emptyOutbox, entryShape, type OutboxData } from "./outbox-shapes.js";
import { fitEach, isPlainObject, kind, quarantine, readJsonFile, type Misfit } from "./quarantine.js";

/**
 * countd before the journal kept the outbox in outbox.json (what is in play) and
 * outbox-delivered.jsonl (acknowledged ids). When they are there and the journal is not, they are
 * read, the journal is written from them (synced) and only then are they removed; when the
 * journal is there too, that migration was cut short after the journal was complete, and they go.
 */
export async function migrateLegacyOutbox(
  stateDir: string,
  journal: string,
  recordsOf: (data: OutboxData, delivered: Map<string, number>) => readonly unknown[],
  log: Logger,
): Promise<void> {
  const files = [join(stateDir, "outbox.json"), join(stateDir, "outbox-delivered.jsonl")] as const;
  const present = await Promise.all(
    [...files, journal].map((file) =>
      access(file).then(
        () => true,
        () => false,
      ),
    ),
  );
  if (!present[0] && !present[1]) return;
  if (!present[2]) {
    const read = await readJsonFile(files[0], "outbox file", "repair it, or move it away (its pending deliveries are then lost)");
    const misfits: Misfit[] = [];
    const data = fitOutbox(read, files[0], misfits);
    const delivered = await readDelivered(files[1], misfits);
    for (const id of delivered.keys()) delete data.entries[id];
    await quarantine(stateDir, misfits, log);
    await writeFileDurably(journal, toJsonLines(recordsOf(data, delivered)));
    log.info({ from: files, to: journal }, "the outbox moved to its journal");
  }
  for (const file of files) await unlink(file).catch(() => {});
}

/** outbox.json's content as the outbox can use it; each entry and disabled target checked on its own. */
function fitOutbox(read: { value: unknown } | undefined, file: string, misfits: Misfit[]): OutboxData {
  const data = emptyOutbox();
  if (read === undefined) return data;
  if (!isPlainObject(read.value)) {
    misfits.push({
      file,
      where: "the whole file",
      problem: `does not fit: expected an object of deliveries, got ${kind(read.value)}`,
      value: read.value,
    });
    return data;
  }
  for (const [key, value] of Object.entries(read.value)) {
    if (key === "entries") {
      for (const [id, entry] of Object.entries(fitEach(entryShape, value, file, key, misfits))) {
        if (entry.id === id) data.entries[id] = entry;
        else misfits.push({ file, where: `entries.${id}`, problem: `does not fit: its id is "${entry.id}"`, value: entry });
      }
    } else if (key === "disabledTargets") {
      data.disabledTargets = fitEach(disabledShape, value, file, key, misfits);
    } else {
      misfits.push({ file, where: key, problem: "is not a part of the outbox", value });
    }
  }
  return data;
}

/** Acknowledged ids by time (epoch ms), in the file's order; a line cut short by a crash is no acknowledgement. */
async function readDelivered(file: string, misfits: Misfit[]): Promise<Map<string, number>> {
  const delivered = new Map<string, number>();
  const text = await readFile(file, "utf8").catch(() => "");
  for (const [index, line] of text.split("\n").entries()) {
    if (line === "") continue;
    const record = parseLine(line);
    if (record) delivered.set(record.id, record.at);
    else misfits.push({ file, where: `line ${index + 1}`, problem: "is no acknowledgement ({id, at})", value: line });
  }
  return delivered;
}

function parseLine(line: string): { id: string; at: number } | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value !== "object" || value === null) return undefined;
    const { id, at } = value as Record<string, unknown>;
    const time = typeof at === "string" ? Date.parse(at) : NaN;
    return typeof id === "string" && !Number.isNaN(time) ? { id, at: time } : undefined;
  } catch {
    return undefined;
  }
}
