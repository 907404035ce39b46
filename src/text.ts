/*
 * How countd writes a thrown value, a long text and a count into its messages, so each reads the
 * same wherever it appears.
 */

/** A thrown value as a message: an Error's message, anything else (a string, a Go error value's fallback) as String() shows it. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `text` whole when it has at most `max` characters, else its first `max`, `…` and `note` (what the cut left out, say). */
export function excerpt(text: string, max: number, note = ""): string {
  return text.length <= max ? text : `${text.slice(0, max)}…${note}`;
}

/** "1 file", "2 files". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
