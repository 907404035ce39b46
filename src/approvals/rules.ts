import * as z from "zod";
import { duration, expected, oneOf, text } from "../config/fields.js";
import { deliveryTargetSchema } from "../delivery/targets.js";

export const ON_TIMEOUT = ["deny", "fail"] as const;
export type OnTimeout = (typeof ON_TIMEOUT)[number];

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/** An `exec:` rule's pattern, split into words: the program, then argument globs. */
export type ExecPattern = string[];

export function execPattern(written: string): ExecPattern {
  return written.trim().split(/\s+/);
}

export type ApprovalRule =
  | { kind: "exec"; written: string; pattern: ExecPattern }
  | { kind: "tool"; name: string }
  | { kind: "web_fetch"; method?: (typeof HTTP_METHODS)[number]; host?: string };

const webFetchRuleSchema = z.strictObject(
  {
    method: oneOf(HTTP_METHODS).optional().describe("The request's method; web_fetch sends GET."),
    host: text().optional().describe('The URL\'s host, or a glob such as "*.example.com".'),
  },
  expected('a web_fetch rule like { method: POST, host: "*.example.com" }'),
);

const ruleSchema = z
  .strictObject(
    {
      exec: text().optional().describe('A program and argument patterns, such as "git push *": a lone * stands for any number of words.'),
      tool: text().optional().describe('A tool by name or glob, such as "mcp_github_*".'),
      web_fetch: webFetchRuleSchema.optional().describe("web_fetch calls to a host, and with a method."),
    },
    expected('a rule: "exec:", "tool:" or "web_fetch:"'),
  )
  .superRefine((rule, ctx) => {
    const given = Object.keys(rule).filter((key) => rule[key as keyof typeof rule] !== undefined);
    if (given.length !== 1)
      ctx.addIssue({
        code: "custom",
        message:
          given.length === 0
            ? 'expected a rule: "exec:", "tool:" or "web_fetch:"'
            : `one kind per rule: put ${given.join(" and ")} in separate items`,
      });
  })
  .transform((rule): ApprovalRule =>
    rule.exec !== undefined
      ? { kind: "exec", written: rule.exec, pattern: execPattern(rule.exec) }
      : rule.tool !== undefined
        ? { kind: "tool", name: rule.tool }
        : { kind: "web_fetch", ...rule.web_fetch },
  );

/** The `approve:` block: which tool calls wait for a person's yes, who is asked, and for how long. */
export const approveSchema = z.strictObject(
  {
    rules: z
      .array(ruleSchema, expected("a list of rules"))
      .min(1, "expected at least one rule: an approve: block without rules gates nothing")
      .describe("The calls that need a yes: - exec: …, - tool: …, - web_fetch: { method, host }."),
    // The wiring that sends the requests owns what an absent ask: means (the job's on_failure targets).
    ask: z
      .array(deliveryTargetSchema, expected("a list of delivery targets"))
      .min(1, "expected at least one target: leave ask: out to ask the job's on_failure targets")
      .optional()
      .describe("Who is asked, in the form of deliver:; left out, the job's on_failure targets."),
    timeout: duration({ allowZero: false }).prefault("4h").describe("How long a call waits for an answer."),
    on_timeout: oneOf(ON_TIMEOUT).default("deny").describe("An unanswered call is denied (the run goes on) or fails the run."),
  },
  expected("an approve: block with rules:"),
);

/** An `approve:` block as read, its timeout in milliseconds. */
export type ApproveSettings = z.output<typeof approveSchema>;
