import { isDeepStrictEqual } from "node:util";
import * as z from "zod";
import { expected, oneOf, text } from "../config/fields.js";
import { pathProblem, selectPath } from "./json-path.js";

/** What a run does when a check fails: see src/runner/verify.ts. */
export const ON_VERIFY_FAIL = ["fail", "retry", "hold", "deliver_flagged"] as const;
export type OnVerifyFail = (typeof ON_VERIFY_FAIL)[number];

const OPS = ["==", "!=", ">=", "<=", ">", "<"] as const;
type Op = (typeof OPS)[number];

/** `$.sources.length >= 3`: a JSONPath, and optionally an operator and a JSON value (a bare word is a string). */
export interface Expectation {
  text: string;
  path: string;
  compare?: { op: Op; value: unknown };
}

export type Check =
  { kind: "command"; command: string } | { kind: "expect"; expect: Expectation[] } | { kind: "tools_called"; tools: string[] };

const EXPECTATION = /^(\$\S*)\s+(==|!=|>=|<=|>|<)\s+(.+)$/;

/** Reads one expectation, or says why it cannot be used. */
export function parseExpectation(written: string): Expectation | string {
  const trimmed = written.trim();
  const match = EXPECTATION.exec(trimmed);
  const path = match ? match[1]! : trimmed;
  if (!match && /\s/.test(trimmed))
    return `expected "<JSONPath> <op> <value>" with an op of ${OPS.join(", ")}, or a bare JSONPath, got ${JSON.stringify(trimmed)}`;
  const problem = pathProblem(path);
  if (problem) return problem;
  if (!match) return { text: trimmed, path };
  try {
    return { text: trimmed, path, compare: { op: match[2] as Op, value: jsonOrWord(match[3]!.trim()) } };
  } catch (err) {
    return (err as Error).message;
  }
}

/** A JSON value, or a bare word (`ok`) as a string. */
function jsonOrWord(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    if (/^[\w.:/@-]+$/.test(value)) return value;
    throw new Error(`expected a JSON value or a word after the operator, got ${JSON.stringify(value)}`);
  }
}

/**
 * Why `value` does not meet the expectation, or undefined when it does: every value the path
 * selects must meet it, and it must select at least one.
 */
export function expectationProblem(expectation: Expectation, value: unknown): string | undefined {
  const selected = selectPath(value, expectation.path);
  if (selected.length === 0) return `${expectation.path} selects nothing`;
  const { compare } = expectation;
  for (const got of selected) {
    const ok = compare ? compared(got, compare.op, compare.value) : Boolean(got);
    if (!ok) return `${expectation.path} is ${JSON.stringify(got)}`;
  }
  return undefined;
}

function compared(got: unknown, op: Op, want: unknown): boolean {
  if (op === "==") return isDeepStrictEqual(got, want);
  if (op === "!=") return !isDeepStrictEqual(got, want);
  if (typeof got !== typeof want || (typeof got !== "number" && typeof got !== "string")) return false;
  const [a, b] = [got as number | string, want as number | string];
  return op === ">" ? a > b : op === ">=" ? a >= b : op === "<" ? a < b : a <= b;
}

/** One expectation or a list, each parsed where it stands so a problem is reported at its line. */
const expectations = z.union([text(), z.array(text(), expected("an expectation or a list of them"))]).transform((written, ctx) => {
  const list = typeof written === "string" ? [written] : written;
  const parsed: Expectation[] = [];
  for (const [i, one] of list.entries()) {
    const result = parseExpectation(one);
    if (typeof result === "string") ctx.addIssue({ code: "custom", message: result, path: typeof written === "string" ? [] : [i] });
    else parsed.push(result);
  }
  return parsed;
});

const checkSchema = z
  .strictObject({
    command: text()
      .optional()
      .describe(
        "A shell command run like exec, in the workspace and its sandbox: the answer on stdin, the output in $COUNTD_OUTPUT; exit 0 passes, its stderr says why not.",
      ),
    expect: expectations
      .optional()
      .describe('JSONPath assertions on the run\'s JSON output, e.g. "$.sources.length >= 3"; a bare path must select something truthy.'),
    tools_called: z
      .array(text(), expected("a list of tool names or globs"))
      .min(1, expected("at least one tool name"))
      .optional()
      .describe("Tools (names or globs) that must have succeeded in this run."),
  })
  .superRefine((c, ctx) => {
    const keys = Object.keys(c).filter((key) => c[key as keyof typeof c] !== undefined);
    if (keys.length !== 1)
      ctx.addIssue({
        code: "custom",
        message: `expected one of command:, expect: or tools_called: per check, got ${keys.length === 0 ? "none" : keys.join(" and ")}`,
      });
  })
  .transform((c): Check =>
    c.command !== undefined
      ? { kind: "command", command: c.command }
      : c.expect !== undefined
        ? { kind: "expect", expect: c.expect }
        : { kind: "tools_called", tools: c.tools_called ?? [] },
  );

/** The job file's `verify:` and `on_verify_fail:` keys. */
export const verifyKeys = {
  verify: z
    .array(checkSchema, expected("a list of checks"))
    .optional()
    .describe("Checks run on the answer before any delivery: - command: …, - expect: …, - tools_called: [...]."),
  on_verify_fail: oneOf(ON_VERIFY_FAIL)
    .default("fail")
    .describe(
      'When a check fails: fail (the run ends error), retry (the agent is asked once more with the failed checks), hold (deliveries wait in the outbox for `countd outbox release`), deliver_flagged (delivered with a "failed checks: …" line).',
    ),
};
