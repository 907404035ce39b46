import { localClock, type RunClock } from "../time.js";
import type { RunStatus } from "../store/run-record.js";
import { pathProblem, selectPath } from "./json-path.js";
import type { Job } from "./types.js";

/** The run whose end fired an `after:` job: what its prompt's `{{upstream.…}}` placeholders read. */
export interface Upstream {
  job: string;
  runId: string;
  status: RunStatus;
  /** Whole, redacted. */
  answer: string;
  /** Its typed output, or else its answer parsed as JSON when it parses; absent when neither. */
  output?: unknown;
}

export interface PromptVars {
  /** What {{date}}, {{time}} and {{datetime}} show. */
  clock: RunClock;
  job: Job;
  runId: string;
  /** Changed paths of a watch-triggered run, as the trigger gives them. */
  files?: string[];
  /** A webhook-triggered run's body, already framed as untrusted data. */
  payload?: string;
  /** An `after:` run's upstream run, with how its model-written values are framed as untrusted data. */
  upstream?: { run: Upstream; framed: (text: string) => string };
}

/** More names than this would crowd out the prompt; the count still tells the agent how many. */
export const MAX_LISTED_FILES = 100;

export const PLACEHOLDERS = ["date", "time", "datetime", "job.name", "job.description", "run.id", "files", "payload"] as const;
type Placeholder = (typeof PLACEHOLDERS)[number];

/** Known only in the prompt of a job with `after:`; `upstream.output.<path>` picks a part of the output. */
export const UPSTREAM_PLACEHOLDERS = ["upstream.answer", "upstream.output", "upstream.run_id", "upstream.job", "upstream.status"] as const;
const OUTPUT_PART = "upstream.output.";

/** `{{name}}`, spaces inside the braces allowed. */
const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/**
 * Placeholders the renderer does not know, each with its index in the template and why. `upstream`:
 * the job has `after:`, so `{{upstream.…}}` has a run to read.
 */
export function unknownPlaceholders(template: string, upstream = false): { text: string; index: number; why?: string }[] {
  const unknown: { text: string; index: number; why?: string }[] = [];
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1]!;
    if (isPlaceholder(name)) continue;
    const found = { text: match[0], index: match.index };
    if (!isUpstream(name)) unknown.push(found);
    else if (!upstream) unknown.push({ ...found, why: "only a job with after: has an upstream run" });
    else if (name.startsWith(OUTPUT_PART)) {
      const problem = pathProblem(outputPath(name));
      if (problem) unknown.push({ ...found, why: problem });
    }
  }
  return unknown;
}

/** One pass over the template, so a value that itself holds `{{…}}` (a file name) stays as it is. */
export function renderPrompt(template: string, vars: PromptVars): string {
  const clock = localClock(vars.clock.at, vars.clock.timeZone);
  const values: Record<Placeholder, () => string> = {
    date: () => clock.date,
    time: () => clock.time,
    datetime: () => clock.datetime,
    "job.name": () => vars.job.name,
    "job.description": () => vars.job.description ?? "",
    "run.id": () => vars.runId,
    files: () => listFiles(vars.files ?? []),
    payload: () => vars.payload ?? "(none)",
  };
  return template.replace(PLACEHOLDER, (whole, name: string) => {
    if (isPlaceholder(name)) return values[name]();
    if (!isUpstream(name) || !vars.job.after) return whole;
    // A follower run by hand (countd run, a rehearsal) follows no run.
    return vars.upstream ? upstreamValue(name, vars.upstream) : "(none)";
  });
}

function upstreamValue(name: string, { run, framed }: NonNullable<PromptVars["upstream"]>): string {
  if (name === "upstream.run_id") return run.runId;
  if (name === "upstream.job") return run.job;
  if (name === "upstream.status") return run.status;
  if (name === "upstream.answer") return framed(run.answer);
  if (run.output === undefined) return "(none)";
  if (name === "upstream.output") return framed(JSON.stringify(run.output));
  const [value] = selectPath(run.output, outputPath(name));
  if (value === undefined) return "(none)";
  return framed(typeof value === "string" ? value : JSON.stringify(value));
}

/** `upstream.output.items[0].title` as the JSONPath `$.items[0].title`. */
function outputPath(name: string): string {
  const rest = name.slice(OUTPUT_PART.length);
  return rest.startsWith("[") ? `$${rest}` : `$.${rest}`;
}

function isUpstream(name: string): boolean {
  return (UPSTREAM_PLACEHOLDERS as readonly string[]).includes(name) || name.startsWith(OUTPUT_PART);
}

function isPlaceholder(name: string): name is Placeholder {
  return (PLACEHOLDERS as readonly string[]).includes(name);
}

function listFiles(files: readonly string[]): string {
  if (files.length === 0) return "(none)";
  const shown = files.slice(0, MAX_LISTED_FILES);
  const rest = files.length - shown.length;
  return [...shown, ...(rest > 0 ? [`… and ${rest} more`] : [])].join("\n");
}
