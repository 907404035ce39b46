import { InvalidArgumentError } from "commander";

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
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new InvalidArgumentError("expected a JSON object, such as '{\"query\": \"x\"}'.");
  return parsed as Record<string, unknown>;
}
