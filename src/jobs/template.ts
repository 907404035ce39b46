import { localClock, type RunClock } from "../time.js";
import type { Job } from "./types.js";

export interface PromptVars {
  /** What {{date}}, {{time}} and {{datetime}} show. */
  clock: RunClock;
  job: Job;
  runId: string;
  /** Changed paths of a watch-triggered run, as the trigger gives them. */
  files?: string[];
  /** A webhook-triggered run's body, already framed as untrusted data. */
  payload?: string;
}

/** More names than this would crowd out the prompt; the count still tells the agent how many. */
export const MAX_LISTED_FILES = 100;

export const PLACEHOLDERS = ["date", "time", "datetime", "job.name", "job.description", "run.id", "files", "payload"] as const;
type Placeholder = (typeof PLACEHOLDERS)[number];

/** `{{name}}`, spaces inside the braces allowed. */
const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** Placeholders the renderer does not know, each with its index in the template. */
export function unknownPlaceholders(template: string): { text: string; index: number }[] {
  return [...template.matchAll(PLACEHOLDER)]
    .filter((match) => !isPlaceholder(match[1]!))
    .map((match) => ({ text: match[0], index: match.index }));
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
  return template.replace(PLACEHOLDER, (whole, name: string) => (isPlaceholder(name) ? values[name]() : whole));
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
