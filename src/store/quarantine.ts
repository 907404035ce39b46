import { appendFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import { silentLogger, type Logger } from "../log.js";

/** In the state directory: what was found there and could not be used, never read back by countd. */
export const QUARANTINE_FILE = "quarantine.jsonl";

/** The shapes every state file's pieces are made of: a time as toISOString writes it, and a count. */
export const isoTime = z.string().refine((text) => !Number.isNaN(Date.parse(text)), "expected an ISO 8601 time");
export const count = z.number().int().nonnegative();

/** One piece of a state file that does not have the shape countd needs. */
export interface Misfit {
  /** The file it was found in. */
  file: string;
  /** Where in the file: a key path like `jobs.report`, or `line 3`. */
  where: string;
  problem: string;
  /** What was there, kept so a person can repair it and put it back. */
  value: unknown;
}

/**
 * Moves misfits aside: one JSON line each in <state_dir>/quarantine.jsonl and one warning each.
 * Called before the file they came from is written without them, so a crash in between leaves
 * a piece in both places, never in neither. A state file is then skipped piece by piece, and one
 * bad entry cannot stop countd or the entries beside it. `log` is the store's own child logger, not
 * one naming the quarantine: a line says whose file the piece came from.
 */
export async function quarantine(stateDir: string, misfits: readonly Misfit[], log: Logger = silentLogger): Promise<void> {
  if (misfits.length === 0) return;
  const file = join(stateDir, QUARANTINE_FILE);
  const at = new Date().toISOString();
  await appendFile(file, misfits.map((misfit) => `${JSON.stringify({ at, ...misfit })}\n`).join(""));
  for (const { file: source, where, problem } of misfits) {
    log.warn(
      { file: source, where, problem, quarantine: file },
      "a piece of a state file does not fit; moved aside to the quarantine file and skipped",
    );
  }
}

/**
 * A JSON state file's content; undefined when there is no file. Text that is not JSON is refused,
 * naming the file (JSON.parse's own message names none) and what to do: a file of which nothing
 * can be read is for a person to look at, not to be moved aside piece by piece.
 */
export async function readJsonFile(file: string, what: string, advice: string): Promise<{ value: unknown } | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot read the ${what} ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    throw new Error(`the ${what} ${file} is not valid JSON (${(err as Error).message}); ${advice}`);
  }
}

/** zod's issues in one line, each at its path below `where`. */
export function problemOf(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => (issue.path.length > 0 ? `at ${issue.path.join(".")}: ${issue.message}` : issue.message))
    .join("; ");
}

/** The value if it fits `shape`, else undefined and a misfit naming `where` in `file`. */
export function fit<T>(shape: z.ZodType<T>, value: unknown, file: string, where: string, misfits: Misfit[]): T | undefined {
  const parsed = shape.safeParse(value);
  if (parsed.success) return parsed.data;
  misfits.push({ file, where, problem: `does not fit: ${problemOf(parsed.error)}`, value });
  return undefined;
}

/**
 * An object of entries by key (`{"<id>": {...}}`), each checked on its own: the entries that fit,
 * and a misfit for each other one; a value that is no such object at all is one misfit.
 */
export function fitEach<T>(shape: z.ZodType<T>, value: unknown, file: string, where: string, misfits: Misfit[]): Record<string, T> {
  const kept: Record<string, T> = {};
  if (!isPlainObject(value)) {
    misfits.push({ file, where, problem: `does not fit: expected an object of entries, got ${kind(value)}`, value });
    return kept;
  }
  for (const [key, entry] of Object.entries(value)) {
    const fitted = fit(shape, entry, file, `${where}.${key}`, misfits);
    if (fitted !== undefined) kept[key] = fitted;
  }
  return kept;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function kind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}
