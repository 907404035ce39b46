import { rename } from "node:fs/promises";
import { join } from "node:path";
import { fileExists } from "./files.js";

const SUFFIX = ".jsonl";

/**
 * Characters a session id keeps in its file name: they mean nothing to a shell, a glob or any
 * file system countd's state may sit on (":" is refused by exFAT, NTFS and SMB shares).
 */
const KEPT = /^[\p{L}\p{N}_@.-]$/u;
/** A leading "." hides a file; a leading "-" makes `rm *` in the folder read it as an option. */
const LEADING_ESCAPED = new Set([".", "-"]);

/**
 * The file name of a session's records: `cron:daily:20261130T090000Z-3f2a` becomes
 * `cron+daily+20261130T090000Z-3f2a.jsonl`. ":" is written "+"; any other character outside
 * letters, digits and "_@.-" (and a leading "." or "-") as %XX of its UTF-8
 * bytes, so "/", "\" and ".." never reach the name, and two ids never share a file.
 */
export function sessionFileName(sessionId: string): string {
  if (sessionId === "") throw new Error("session id must not be empty");
  let name = "";
  for (const char of sessionId) {
    if (char === ":") name += "+";
    else if (KEPT.test(char) && !(name === "" && LEADING_ESCAPED.has(char))) name += char;
    else name += [...Buffer.from(char, "utf8")].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join("");
  }
  return name + SUFFIX;
}

/** The file name countd used before readable names: the id URL-encoded. */
function legacyFileName(sessionId: string): string {
  return `${encodeURIComponent(sessionId)}${SUFFIX}`;
}

/**
 * The session id a file in a sessions or tool-history folder belongs to, under either naming;
 * undefined for a file countd did not name. One reading serves both: legacy names never hold a
 * "+" (encodeURIComponent writes it %2B), and both write every other escape as %XX.
 */
export function sessionIdOfFile(fileName: string): string | undefined {
  if (!fileName.endsWith(SUFFIX) || fileName.length === SUFFIX.length) return undefined;
  try {
    return decodeURIComponent(fileName.slice(0, -SUFFIX.length).replaceAll("+", ":"));
  } catch {
    return undefined;
  }
}

/** A file still under its URL-encoded name, which adoptLegacyFile renames. */
export function isLegacyFileName(fileName: string): boolean {
  const id = sessionIdOfFile(fileName);
  return id !== undefined && fileName !== sessionFileName(id) && fileName === legacyFileName(id);
}

/**
 * Gives a session's file written by an earlier countd (URL-encoded name) its readable name, so
 * its history is read and appended to, not lost. Called before a session's file is used; true
 * when it renamed the file. Another process renaming the same file at once is fine: one rename
 * wins and the other finds nothing. When both names exist (an older countd wrote after a newer
 * one), the readable file is the one in use and the old one is left as it is.
 */
export async function adoptLegacyFile(dir: string, sessionId: string): Promise<boolean> {
  const legacy = legacyFileName(sessionId);
  const current = sessionFileName(sessionId);
  if (legacy === current) return false;
  // Looked for on the main thread: this runs before every first use of a session, and the old
  // name is nearly never there.
  if (!fileExists(join(dir, legacy)) || fileExists(join(dir, current))) return false;
  try {
    await rename(join(dir, legacy), join(dir, current));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
