import type { RunDelivery, RunView, TranscriptStep } from "../console/protocol.js";
import { costText, plural, span, tokensText } from "../text.js";
import { PAUSED } from "../runner/overlap.js";
import { shownTime } from "../time.js";

/** A tool result longer than this is cut in the terminal; `--json` has it whole. */
export const RESULT_CHARS = 2_000;
export const RESULT_LINES = 40;

/**
 * Control characters in the agent's or a tool's text would be obeyed by the terminal (escape
 * sequences move the cursor, rewrite the title, hide lines; a carriage return overwrites): they
 * are shown as U+FFFD, so what is printed is what was said. Newlines and tabs stay.
 */
export function inert(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "\ufffd");
}

/**
 * `countd show`: a run's transcript for a terminal, from header to deliveries. `offline`: read
 * without the daemon, which alone knows the deliveries already acknowledged.
 */
export function formatRun(view: RunView, offline = false): string {
  const { run, transcript } = view;
  const time = (iso: string | undefined) => (iso ? shownTime(iso, view.timezone) : "-");
  const header: Array<[string, string]> = [
    ["reason", run.reason],
    ...(run.node !== undefined
      ? [["node", `${run.node}${run.attempt !== undefined && run.attempt > 1 ? ` (attempt ${run.attempt})` : ""}`] as [string, string]]
      : []),
    ["status", view.running ? "running (countd follow shows it live)" : run.status],
    ["scheduled", time(run.scheduledAt)],
    ["started", time(run.startedAt)],
    ["finished", time(run.finishedAt)],
    ["duration", run.finishedAt ? span(Date.parse(run.finishedAt) - Date.parse(run.startedAt)) : "-"],
    ["tokens", `${tokensText(run.usage)} (${plural(run.iterations, "iteration")}, ${plural(run.toolCalls, "tool call")})`],
    ["cost", costText(run.cost, run.usage)],
    ...(run.error ? [["error", inert(run.error)] as [string, string]] : []),
    ...(run.files ? [["files", filesLines(run)] as [string, string]] : []),
  ];
  const out = [`${run.job}  run ${run.id}`, ...header.map(([name, value]) => `  ${name.padEnd(10)} ${value}`), ""];
  const noPrompt = run.status === "skipped" ? "(none: the fire was skipped before a prompt was made)" : "(not recorded)";
  out.push("Prompt", indent(inert(transcript.prompt ?? noPrompt), "  "), "");
  out.push("Steps");
  if (transcript.steps.length === 0) out.push("  (none)");
  for (const step of transcript.steps) out.push(...stepLines(step));
  if (transcript.incomplete) out.push(`  (incomplete: ${transcript.incomplete})`);
  if (transcript.output !== undefined) out.push("", "Output", indent(inert(JSON.stringify(transcript.output, null, 2)), "  "));
  out.push("", "Deliveries");
  if (run.notDelivered !== undefined) out.push(`  not delivered: ${run.notDelivered}`);
  else if (view.deliveries.length === 0) out.push(offline ? "  (none pending or dead)" : "  (none)");
  for (const delivery of view.deliveries) out.push(`  ${deliveryLine(delivery, time)}`);
  if (offline) out.push("  (acknowledged deliveries are listed while countd runs)");
  return `${out.join("\n")}\n`;
}

/** A watch run's changed files, one a line under the header's `files`, with what became of a paused job's. */
function filesLines(run: RunView["run"]): string {
  const lines = (run.files ?? []).map(inert);
  if (run.moreFiles) lines.push(`… and ${run.moreFiles} more`);
  if (run.status === "skipped" && run.error === PAUSED) lines.push("(changed while the job was paused: kept for the run at countd resume)");
  return lines.join(`\n${" ".repeat(13)}`);
}

/** `countd history`'s note on a skipped watch fire: the files it carried. */
export function skippedFilesNote(run: RunView["run"]): string {
  if (run.status !== "skipped" || !run.files) return "";
  const more = run.files.length - 3 + (run.moreFiles ?? 0);
  return ` (files: ${run.files.slice(0, 3).map(inert).join(", ")}${more > 0 ? `, and ${more} more` : ""})`;
}

function stepLines(step: TranscriptStep): string[] {
  if (step.kind === "subagent") return [`  subagent ${step.id}  ${firstIndented(inert(step.task), 4)}`];
  if (step.kind === "approval") return [`  ${approvalLine(step)}`];
  if (step.kind === "verify") {
    const verdict = step.passed ? "passed" : `FAILED: ${firstIndented(inert(step.reason ?? ""), 4)}`;
    return [`  check ${step.index + 1} ${step.check} ${inert(step.what)}  ${verdict}`];
  }
  // A subagent's steps lie among its parent's as they happened: each says whose it is.
  const whose = step.subagent !== undefined ? `[subagent ${step.subagent}] ` : "";
  if (step.kind === "llm") {
    const end = step.error ? `  error: ${inert(step.error)}` : step.finish_reason ? `  (${step.finish_reason})` : "";
    const cost = step.cost !== undefined ? `  ${costText(step.cost, step.usage)}` : "";
    const what = step.purpose === "summary" ? "LLM (history summary)" : "LLM";
    return [`  ${whose}${what} ${step.model}  ${tokensText(step.usage)}${cost}  ${span(step.duration_ms)}${end}`];
  }
  if (step.kind === "text") return [indent(`${whose}${inert(step.text)}`, "    ")];
  if (step.kind === "repair")
    return [`  ${whose}repair asked: the answer is not valid against output.schema`, ...step.errors.map((e) => `    ${inert(e)}`)];
  const facts = [
    step.is_error ? "error" : "ok",
    ...(step.duration_ms !== undefined ? [span(step.duration_ms)] : []),
    ...(step.attempts !== undefined && step.attempts > 1 ? [plural(step.attempts, "attempt")] : []),
  ];
  const lines = [
    `  ${whose}tool ${step.name}  ${facts.join("  ")}`,
    `    arguments  ${firstIndented(inert(cut(argumentsText(step.arguments))), 15)}`,
  ];
  if (step.result !== undefined) lines.push(`    result     ${firstIndented(inert(cut(step.result)), 15)}`);
  return lines;
}

function argumentsText(args: unknown): string {
  if (typeof args === "string") return args;
  const compact = JSON.stringify(args ?? {});
  return compact.length <= 100 ? compact : JSON.stringify(args, null, 2);
}

/** Text cut to RESULT_LINES lines and RESULT_CHARS characters, with what was left out said. */
export function cut(text: string): string {
  const lines = text.split("\n");
  let shown = lines.slice(0, RESULT_LINES).join("\n");
  if (shown.length > RESULT_CHARS) shown = shown.slice(0, RESULT_CHARS);
  if (shown.length === text.length) return text;
  return `${shown}…\n[cut: ${plural(text.length, "character")}, ${plural(lines.length, "line")} in all; --json shows the whole]`;
}

function deliveryLine(delivery: RunDelivery, time: (iso: string | undefined) => string): string {
  // A held delivery waits for a person, not for a time: why, and how to send it.
  if (delivery.held !== undefined) return [delivery.to, "held", inert(delivery.held), `countd outbox release ${delivery.id}`].join("  ");
  const parts = [delivery.to, delivery.status];
  if (delivery.status === "delivered") parts.push(time(delivery.delivered_at));
  if (delivery.attempts !== undefined) parts.push(plural(delivery.attempts, "attempt"));
  if (delivery.next_attempt_at) parts.push(`next ${time(delivery.next_attempt_at)}`);
  if (delivery.last_error) parts.push(`last error: ${inert(delivery.last_error)}`);
  return parts.join("  ");
}

function indent(text: string, prefix: string): string {
  return text
    .split("\n")
    .map((line) => (line ? prefix + line : line))
    .join("\n");
}

/** The first line as it is (after a label `width` wide), the others indented under it. */
function firstIndented(text: string, width: number): string {
  const [first, ...rest] = text.split("\n");
  return [first, ...rest.map((line) => (line ? " ".repeat(width) + line : line))].join("\n");
}

/** An approval step in one line: what was asked, and the answer with who gave it. */
function approvalLine(step: Extract<TranscriptStep, { kind: "approval" }>): string {
  if (step.event === "asked")
    return `approval asked for ${step.tool} (${inert(step.rule ?? "")}), until ${step.expires_at ?? "?"}; countd approve ${step.id}`;
  const who = step.by !== undefined ? ` by ${inert(step.by)} (${step.via ?? "?"})` : "";
  return `approval ${step.event}${who}${step.note ? `: ${firstIndented(inert(step.note), 4)}` : ""}`;
}
