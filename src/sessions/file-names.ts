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

/**
 * The session id a file in a sessions or tool-history folder belongs to; undefined for a file
 * countd did not name.
 */
export function sessionIdOfFile(fileName: string): string | undefined {
  if (!fileName.endsWith(SUFFIX) || fileName.length === SUFFIX.length) return undefined;
  try {
    return decodeURIComponent(fileName.slice(0, -SUFFIX.length).replaceAll("+", ":"));
  } catch {
    return undefined;
  }
}
