import { htmlConverter } from "../html/convert.js";
import type { MailBodies } from "../html/mail.js";
import { localClock, shownTime, type RunClock } from "../time.js";
import type { ApprovalRequest, DeliveryMessage } from "./message.js";
import { plural, span, tokensText, usd } from "../text.js";

/** Longest a mail's rendering may take before the answer goes out as preformatted text instead. */
export const RENDER_TIMEOUT_MS = 10_000;

/**
 * Markdown as sanitised HTML, and the same content as plain text. The converters run on the
 * conversion worker (html/convert.ts), since an answer that quotes a hostile page can make them
 * run for seconds; one that runs past RENDER_TIMEOUT_MS or fails is sent as the answer's own text,
 * escaped in a <pre>, so the mail still goes out.
 */
export async function renderMarkdown(markdown: string, timeoutMs = RENDER_TIMEOUT_MS): Promise<MailBodies> {
  try {
    return await htmlConverter.mail(markdown, { timeoutMs });
  } catch {
    return { html: `<pre>${escapeHtml(markdown)}</pre>`, text: markdown };
  }
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What every channel shows as the message's headline. */
export function messageTitle(message: DeliveryMessage): string {
  switch (message.kind) {
    case "run.completed":
      return `${message.job}: completed`;
    case "run.failed":
      return `${message.job}: ${message.failing ? "still failing" : "failed"} (${message.run.status})`;
    case "run.recovered":
      return `${message.job}: recovered`;
    case "heartbeat":
      // Named by its sender, as the mail subject is: "@heartbeat" is a run-history name, not one a reader knows.
      return `${message.persona ?? "countd"}: check-in`;
    case "approval.requested":
      return `Approval needed: ${message.job} wants to run ${message.approval?.tool ?? "a tool"}`;
    case "test":
      return `${message.job}: test message`;
  }
}

/** The message body as markdown: the answer, then for a failed run the error and the last tool calls. */
export function messageMarkdown(message: DeliveryMessage, opts: { short?: boolean } = {}): string {
  if (message.kind === "approval.requested" && message.approval) return approvalMarkdown(message, message.approval, opts.short ?? false);
  // Above the answer: a reader must see it was not checked out before reading it.
  const flag = message.failedChecks ? `**failed checks: ${message.failedChecks.join(" · ")}**` : "";
  const parts = [flag, message.result.trim()];
  const { failing } = message;
  // A message queued by an older countd has no zone: UTC, which its offset still says.
  const since = failing ? shownTime(failing.since, message.timezone ?? "UTC") : "";
  if (message.kind === "run.recovered" && failing) {
    parts.push(`**Run ${message.run.id} ok after ${plural(failing.failures, "failed run")} since ${since}.**`);
  }
  if (message.kind === "run.failed" && failing) {
    const quiet = failing.unreported > 0 ? `; ${plural(failing.unreported, "failure")} since the last report not reported` : "";
    parts.push(`**Still failing: ${plural(failing.failures, "failed run")} since ${since}${quiet}.**`);
  }
  if (message.kind === "run.failed") {
    parts.push(`**Run ${message.run.id} ${message.run.status}.**`);
    if (message.error) parts.push(`Error:\n\n${codeBlock(message.error)}`);
    if (message.lastToolCalls && message.lastToolCalls.length > 0) {
      const lines = message.lastToolCalls.map((call) => `${call.status === "ok" ? "ok   " : "error"}  ${call.name}  ${call.summary}`);
      parts.push(`Last tool calls:\n\n${codeBlock(lines.join("\n"))}`);
    }
    // The alert is read away from the machine: it says how to find the run there.
    const show = `See the whole run with \`countd show ${message.run.id} --job ${message.job}\``;
    // No full stop after a URL: a mail client would take it into the link.
    parts.push(message.consoleUrl ? `${show}, or open ${message.consoleUrl}` : `${show}.`);
  }
  return parts.filter((part) => part !== "").join("\n\n");
}

/** What a chat message shows of the arguments and the reasoning: the mail and the approval page show them whole. */
const SHORT_ARGUMENTS = 600;
const SHORT_REASONING = 300;

/**
 * An approval request: the call, why it waits, until when, and how to answer. The agent's words
 * (arguments, reasoning) are shown in code blocks only, so a link an injected page made the agent
 * write can never pass for the Approve link. `short`: a chat message, its excerpts cut.
 */
function approvalMarkdown(message: DeliveryMessage, approval: ApprovalRequest, short: boolean): string {
  const zone = message.timezone ?? "UTC";
  const args = JSON.stringify(approval.arguments ?? null, null, 2);
  const waited = span(Date.parse(approval.expiresAt) - Date.parse(approval.askedAt));
  const then =
    approval.onTimeout === "fail"
      ? "If nobody answers by then, the run fails."
      : "If nobody answers by then, the call is denied and the run goes on without it.";
  // An id that starts with "-" would be read as an option.
  const id = approval.id.startsWith("-") ? `-- ${approval.id}` : approval.id;
  return [
    `**Job ${message.job} wants to run \`${approval.tool}\`** and waits for your answer (run ${message.run.id}).`,
    approval.links ? `[Approve](${approval.links.approve}) · [Deny](${approval.links.deny})` : "",
    `Expires ${shownTime(approval.expiresAt, zone)} (${waited} after it was asked). ${then}`,
    `Rule that matched: ${codeSpan(approval.rule)}`,
    `Arguments:\n\n${codeBlock(short ? excerpt(args, SHORT_ARGUMENTS) : args, "json")}`,
    approval.reasoning.trim()
      ? `Reasoning so far:\n\n${codeBlock(short ? excerpt(approval.reasoning.trim(), SHORT_REASONING) : approval.reasoning.trim())}`
      : "",
    `Or answer on the machine countd runs on:\n\n${codeBlock(`countd approve ${id}\ncountd deny ${id}`)}`,
  ]
    .filter((part) => part !== "")
    .join("\n\n");
}

function excerpt(text: string, max: number): string {
  return text.length <= max
    ? text
    : `${text.slice(0, max)}\n…(${plural(text.length - max, "more character")}: the mail and countd approvals --json show all)`;
}

/** Backticks inside are fenced by a longer run, as markdown allows. */
export function codeSpan(text: string): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = "`".repeat(longest + 1);
  return longest > 0 ? `${fence} ${text} ${fence}` : `${fence}${text}${fence}`;
}

/** An email target's `footer: usage` line: what the run used, cost and took. */
export function usageFooter(run: DeliveryMessage["run"]): string {
  const cost = run.cost === null ? "not known (a model has no price)" : usd(run.cost);
  return `Tokens: ${tokensText(run.usage)} · Cost: ${cost} · Duration: ${span(run.durationMs)}`;
}

/** A fence longer than any backtick run inside, so no text can close it early. */
function codeBlock(text: string, lang = ""): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}${lang}\n${text}\n${fence}`;
}

export const TEMPLATE_PLACEHOLDERS = ["job.name", "date", "time", "status", "run.id"] as const;
type Placeholder = (typeof TEMPLATE_PLACEHOLDERS)[number];

export interface TemplateVars {
  job: string;
  runId: string;
  status: string;
  /** What {{date}} and {{time}} show: the run's clock, the one its prompt was filled from. */
  clock: RunClock;
  /** What {{output.…}} reads: the run's typed output, when the job has one. */
  output?: unknown;
}

/** `{{output}}` or `{{output.path.to.field}}`, a list's items by index: `{{output.items.0.id}}`. */
const OUTPUT_PLACEHOLDER = /^output(\.[^.\s]+)*$/;

/** `{{name}}`, spaces inside the braces allowed. */
const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** Placeholders a template holds that `renderTemplate` does not know. */
export function unknownTemplatePlaceholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)]
    .filter((match) => !isPlaceholder(match[1]!) && !OUTPUT_PLACEHOLDER.test(match[1]!))
    .map((match) => match[0]);
}

/**
 * Fills {{job.name}}, {{date}} (YYYY-MM-DD), {{time}} (HH:MM), {{status}}, {{run.id}} and
 * {{output.…}}; one pass, so values are never re-read as templates.
 */
export function renderTemplate(template: string, vars: TemplateVars): string {
  const clock = localClock(vars.clock.at, vars.clock.timeZone);
  const values: Record<Placeholder, string> = {
    "job.name": vars.job,
    date: clock.date,
    time: clock.time,
    status: vars.status,
    "run.id": vars.runId,
  };
  return template.replace(PLACEHOLDER, (whole, name: string) =>
    isPlaceholder(name) ? values[name] : OUTPUT_PLACEHOLDER.test(name) ? outputText(vars.output, name.split(".").slice(1)) : whole,
  );
}

function isPlaceholder(name: string): name is Placeholder {
  return (TEMPLATE_PLACEHOLDERS as readonly string[]).includes(name);
}

/**
 * The field at `path` of the output on one line: a string as it is, any other value as JSON;
 * nothing for a field the output does not have (or a run with no output), as a subject must
 * still go out.
 */
function outputText(output: unknown, path: string[]): string {
  let value = output;
  for (const key of path) value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
  if (value === undefined) return "";
  return (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s*\n\s*/g, " ");
}
