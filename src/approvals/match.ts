import picomatch from "picomatch";
import type { ShellSyntax } from "../tools/shell-syntax.js";
import { commandMatches, commandText, readLine, type ReadLine } from "./exec-pattern.js";
import type { ApprovalRule } from "./rules.js";

/*
 * Matching a tool call against the approve: rules, kept apart from the rules' schema: reading
 * countd.yaml or a job file needs the schema only, never the shell parser the matching uses.
 */

/** web_fetch only sends GET (src/tools/web.ts), so that is the method a rule's `method:` is compared with. */
const WEB_FETCH_METHOD = "GET";

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
