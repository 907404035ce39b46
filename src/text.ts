import bytes from "bytes";
import type { Usage } from "./providers/types.js";

/*
 * How countd writes a thrown value, a long text, a count, tokens, a cost and a span of time into
 * its messages, so each reads the same wherever it appears (the CLI, mails).
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

/**
 * A whole number with a comma between thousands, as toLocaleString("en-US") writes it, without
 * the 10-15 ms ICU takes to set up number formatting at its first call (the daemon's start-up
 * describes its tools' limits this way).
 */
export function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+$)/g, ",");
}

/** A size as the tools report it: "1 byte", "17 bytes", "1.2 KB", "64 KB", "1.5 MB" (units of 1,024). */
export function formatBytes(n: number): string {
  // bytes.format gives null for what is no finite number; below 1,024 a count of bytes reads better than "17 B".
  return (n >= 1024 ? bytes.format(n, { unitSeparator: " ", decimalPlaces: 1 }) : null) ?? plural(n, "byte");
}

/** Whether some of these tokens are countd's estimate, the provider having reported none. */
export const isEstimated = (usage: Usage): boolean => (usage.estimatedTokens ?? 0) > 0;

/**
 * Tokens as countd shows them: `1200 in (800 cached, 300 cache writes) / 50 out`, the parts in
 * brackets only when not 0; `~1200 in / ~50 out` when some are estimated.
 */
export function tokensText(usage: Usage): string {
  const parts = [
    ...(usage.cachedInputTokens > 0 ? [`${usage.cachedInputTokens} cached`] : []),
    ...(usage.cacheWriteTokens > 0 ? [`${usage.cacheWriteTokens} cache writes`] : []),
  ];
  const about = isEstimated(usage) ? "~" : "";
  return `${about}${usage.inputTokens} in${parts.length > 0 ? ` (${parts.join(", ")})` : ""} / ${about}${usage.outputTokens} out`;
}

/**
 * USD to a hundredth of a cent, `$0.0123`, `$12.5000`, so amounts line up in a column; an amount
 * above 0 but below that is `<$0.0001`, never a misleading `$0.0000`.
 */
export function usd(amount: number): string {
  return amount > 0 && amount < 0.00005 ? "<$0.0001" : `$${amount.toFixed(4)}`;
}

/**
 * A run's or a call's cost: USD (`~$0.0123` when its usage is partly estimated), `unpriced` for a
 * model with no price (null), `-` where none was recorded (older records).
 */
export function costText(cost: number | null | undefined, usage?: Usage): string {
  return cost === undefined ? "-" : cost === null ? "unpriced" : `${usage && isEstimated(usage) ? "~" : ""}${usd(cost)}`;
}

/** A span of time: `850ms`, `4.2s`, `75s`, `3m 20s`, `2h 5m`, `3d 4h`. */
export function span(milliseconds: number): string {
  if (milliseconds < 1_000) return `${Math.round(milliseconds)}ms`;
  const seconds = milliseconds / 1_000;
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  if (seconds < 100) return `${Math.round(seconds)}s`;
  const units: Array<[string, number]> = [
    ["d", 86_400],
    ["h", 3_600],
    ["m", 60],
    ["s", 1],
  ];
  const whole = Math.round(seconds);
  const first = units.findIndex(([, size]) => whole >= size);
  return units
    .slice(first, first + 2)
    .map(([unit, size], i) => `${i === 0 ? Math.floor(whole / size) : Math.floor((whole % units[first]![1]) / size)}${unit}`)
    .join(" ");
}
