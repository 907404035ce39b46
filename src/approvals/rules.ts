import picomatch from "picomatch";
import * as z from "zod";
import { duration, expected, oneOf, text } from "../config/fields.js";
import { deliveryTargetSchema } from "../delivery/targets.js";
import type { ShellSyntax } from "../tools/shell-syntax.js";
import { commandMatches, commandText, execPattern, readLine, type ExecPattern, type ReadLine } from "./exec-pattern.js";

export const ON_TIMEOUT = ["deny", "fail"] as const;
export type OnTimeout = (typeof ON_TIMEOUT)[number];

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/** web_fetch only sends GET (src/tools/web.ts), so that is the method a rule's `method:` is compared with. */
const WEB_FETCH_METHOD = "GET";

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

/** A tool call as the agent asked for it. */
export interface ToolCall {
  name: string;
  arguments: unknown;
}

export interface ApprovalMatch {
  /** The index of the rule in `rules:`. */
  rule: number;
  why: string;
}

/**
 * The first rule the call matches, in the order written, or undefined when it may go ahead
 * unasked. `shell` is the loaded parser: exec rules compare the words of each simple command,
 * never the raw text, and a command line the parser cannot read fully matches every exec rule,
 * since it might hide the command the rule is about.
 */
export function matchApproval(rules: readonly ApprovalRule[], call: ToolCall, shell: ShellSyntax): ApprovalMatch | undefined {
  let read: ReadLine | undefined;
  const line = () => (read ??= readCommand(call.arguments, shell));
  for (const [index, rule] of rules.entries()) {
    const why = rule.kind === "exec" ? (call.name === "exec" ? execMatch(rule, line()) : undefined) : otherMatch(rule, call);
    if (why !== undefined) return { rule: index, why };
  }
  return undefined;
}

function readCommand(args: unknown, shell: ShellSyntax): ReadLine {
  const line = (args as { command?: unknown } | null)?.command;
  return typeof line === "string" ? readLine(line, shell) : { commands: [], unreadable: "the call has no command line" };
}

function execMatch(rule: Extract<ApprovalRule, { kind: "exec" }>, read: ReadLine): string | undefined {
  const argv = read.commands.find((command) => commandMatches(rule.pattern, command));
  if (argv) return `the command ${JSON.stringify(commandText(argv))} matches "${rule.written}"`;
  if (read.unreadable === undefined) return undefined;
  return `the command line cannot be read word by word (${read.unreadable}), so it is taken as matching "${rule.written}"`;
}

function otherMatch(rule: Exclude<ApprovalRule, { kind: "exec" }>, call: ToolCall): string | undefined {
  if (rule.kind === "tool") return picomatch.isMatch(call.name, rule.name) ? `the tool ${call.name} matches "${rule.name}"` : undefined;
  if (call.name !== "web_fetch") return undefined;
  if (rule.method !== undefined && rule.method !== WEB_FETCH_METHOD) return undefined;
  const method = rule.method === undefined ? "" : ` ${rule.method}`;
  if (rule.host === undefined) return `web_fetch${method} matches the rule for every host`;
  const url = (call.arguments as { url?: unknown } | null)?.url;
  const host = hostOf(url);
  if (host === undefined) return `web_fetch of ${JSON.stringify(url)}, whose host cannot be read, is taken as matching "${rule.host}"`;
  return picomatch.isMatch(host, rule.host.toLowerCase(), { dot: true })
    ? `web_fetch${method} of ${host} matches "${rule.host}"`
    : undefined;
}

/** The URL's host name, lower case, without brackets or a trailing dot; undefined when it is no http(s) URL. */
function hostOf(url: unknown): string | undefined {
  if (typeof url !== "string" || !URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return undefined;
  return parsed.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
}
