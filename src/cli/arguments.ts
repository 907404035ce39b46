import { InvalidArgumentError } from "commander";
import ms from "ms";

/**
 * Parsers for command-line values: a value they refuse is a usage error, reported by commander
 * with the option or argument it was given for (exit 2, see cli.ts).
 */

/** A whole number of at least 1, written as digits only: `abc`, `0`, `-5`, `2.5` and `10x` are refused. */
export function positiveInteger(value: string): number {
  const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < 1) throw new InvalidArgumentError("expected a whole number of at least 1.");
  return number;
}

/** Text with something besides white space in it. */
export function nonEmpty(value: string): string {
  if (value.trim() === "") throw new InvalidArgumentError("it is empty.");
  return value;
}

/** A JSON object, such as a tool's arguments. */
export function jsonObject(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not valid JSON: ${(err as Error).message}.`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new InvalidArgumentError('expected a JSON object, such as \'{"query": "x"}\'.');
  return parsed as Record<string, unknown>;
}

/**
 * A span back from now, as ms() reads it: `7d`, `24h`, `90m`, `2w`. A unit is required: a bare
 * number would be milliseconds to ms() and seconds in countd.yaml, so either reading would surprise someone.
 */
export function pastDuration(value: string): number {
  const milliseconds = /^\s*\d+(\.\d+)?\s*[a-z]+\s*$/i.test(value) ? (ms(value as ms.StringValue) as number | undefined) : undefined;
  if (milliseconds === undefined || !Number.isFinite(milliseconds) || milliseconds <= 0) {
    throw new InvalidArgumentError('expected a duration with its unit, like "7d", "24h" or "30m".');
  }
  return milliseconds;
}

/** What `countd cost --by` groups the calls by. */
export const COST_GROUPS = ["job", "model", "day"] as const;
export type CostGroup = (typeof COST_GROUPS)[number];
