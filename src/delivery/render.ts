import { localClock } from "../time.js";
import type { DeliveryMessage } from "./message.js";
import { plural } from "../text.js";

/**
 * Markdown as sanitised HTML, and the same content as plain text (markdown rebuilt from the cleaned HTML).
 * The converters are loaded by the first mail rather than at start-up: many daemons never send one.
 */
export async function renderMarkdown(markdown: string): Promise<{ html: string; text: string }> {
  const [{ marked }, { default: sanitizeHtml }, { NodeHtmlMarkdown }] = await Promise.all([
    import("marked"),
    import("sanitize-html"),
    import("node-html-markdown"),
  ]);
  // The answer is written by an LLM that may have read hostile pages, so its HTML is cut down to
  // what a report needs: no scripts, styles, forms, frames, images (remote loads) or event handlers,
  // and links only to http(s), mailto and tel. Tables, code and links stay.
  const html = sanitizeHtml(marked.parse(markdown, { async: false, gfm: true }), {
    allowedTags: [...sanitizeHtml.defaults.allowedTags, "del"],
    allowedAttributes: {
      a: ["href", "title"],
      th: ["align"],
      td: ["align"],
      ol: ["start"],
    },
    allowedSchemes: ["http", "https", "mailto", "tel"],
    allowProtocolRelative: false,
  }).trim();
  return { html, text: NodeHtmlMarkdown.translate(html).trim() };
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
      return `${message.job}: check-in`;
  }
}

/** The message body as markdown: the answer, then for a failed run the error and the last tool calls. */
export function messageMarkdown(message: DeliveryMessage): string {
  const parts = [message.result.trim()];
  const { failing } = message;
  if (message.kind === "run.recovered" && failing) {
    parts.push(`**Run ${message.run.id} ok after ${plural(failing.failures, "failed run")} since ${failing.since}.**`);
  }
  if (message.kind === "run.failed" && failing) {
    const quiet = failing.unreported > 0 ? `; ${plural(failing.unreported, "failure")} since the last report not reported` : "";
    parts.push(`**Still failing: ${plural(failing.failures, "failed run")} since ${failing.since}${quiet}.**`);
  }
  if (message.kind === "run.failed") {
    parts.push(`**Run ${message.run.id} ${message.run.status}.**`);
    if (message.error) parts.push(`Error:\n\n${codeBlock(message.error)}`);
    if (message.lastToolCalls && message.lastToolCalls.length > 0) {
      const lines = message.lastToolCalls.map((call) => `${call.status === "ok" ? "ok   " : "error"}  ${call.name}  ${call.summary}`);
      parts.push(`Last tool calls:\n\n${codeBlock(lines.join("\n"))}`);
    }
  }
  return parts.filter((part) => part !== "").join("\n\n");
}

/** A fence longer than any backtick run inside, so no text can close it early. */
function codeBlock(text: string): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}\n${text}\n${fence}`;
}

export const TEMPLATE_PLACEHOLDERS = ["job.name", "date", "time", "status", "run.id"] as const;
type Placeholder = (typeof TEMPLATE_PLACEHOLDERS)[number];

export interface TemplateVars {
  job: string;
  runId: string;
  status: string;
  /** The moment {{date}} and {{time}} show, in `timeZone`. */
  at: Date;
  /** IANA name. */
  timeZone: string;
}

/** `{{name}}`, spaces inside the braces allowed. */
const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** Placeholders a template holds that `renderTemplate` does not know. */
export function unknownTemplatePlaceholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].filter((match) => !isPlaceholder(match[1]!)).map((match) => match[0]);
}

/** Fills {{job.name}}, {{date}} (YYYY-MM-DD), {{time}} (HH:MM), {{status}} and {{run.id}}; one pass, so values are never re-read as templates. */
export function renderTemplate(template: string, vars: TemplateVars): string {
  const clock = localClock(vars.at, vars.timeZone);
  const values: Record<Placeholder, string> = {
    "job.name": vars.job,
    date: clock.date,
    time: clock.time,
    status: vars.status,
    "run.id": vars.runId,
  };
  return template.replace(PLACEHOLDER, (whole, name: string) => (isPlaceholder(name) ? values[name] : whole));
}

function isPlaceholder(name: string): name is Placeholder {
  return (TEMPLATE_PLACEHOLDERS as readonly string[]).includes(name);
}

