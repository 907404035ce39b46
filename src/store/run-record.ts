import type { Usage } from "../providers/types.js";

/** The heartbeat's runs are recorded under this name, which no job file can take (a job name starts with a letter or digit). */
export const HEARTBEAT_JOB = "@heartbeat";

export const RUN_REASONS = [
  "schedule",
  "watch",
  "webhook",
  "heartbeat",
  "manual",
  "catch-up",
  "retry",
  "after",
  "rehearsal",
  "replay",
  "fork",
] as const;
/** Runs that try a job rather than do its work (src/rehearse/): journalled, never in its history, state or alerts. */
export const REHEARSAL_REASONS: readonly RunReason[] = ["rehearsal", "replay", "fork"];
export type RunReason = (typeof RUN_REASONS)[number];
/** `waiting`: suspended on a tool call that waits for a person's approval (src/approvals/). */
export const RUN_STATUSES = ["running", "waiting", "ok", "error", "timeout", "cancelled", "skipped", "interrupted", "budget"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** One run as recorded in the state store and shown by `countd history`. */
export interface RunRecord {
  id: string;
  job: string;
  reason: RunReason;
  /** ISO 8601. */
  scheduledAt: string;
  startedAt: string;
  finishedAt?: string;
  status: RunStatus;
  iterations: number;
  toolCalls: number;
  /** Every LLM call made for the run, its subagents' included. */
  usage: Usage;
  /** USD; null when a call's model has no price; absent on runs that never started and on records older than pricing. */
  cost?: number | null;
  /** The model of the run's last LLM call. */
  model?: string;
  /** The answer, cut to a few hundred characters. */
  resultExcerpt?: string;
  error?: string;
  sessionId: string;
  /** The node whose daemon recorded the run, where daemons share a backend; absent alone. */
  node?: string;
  /** Where daemons share a backend: which try of its fire the run is, 1 for the first (a retry's may run on another node); absent alone. */
  attempt?: number;
  /** A watch fire's changed paths, the first MAX_RECORDED_FILES, also when the fire was skipped. */
  files?: string[];
  /** How many more paths the fire carried than `files` lists. */
  moreFiles?: number;
  /** Why an ok run's answer was not delivered, e.g. "unchanged since run <id>" (deliver_when: changed). */
  notDelivered?: string;
}

/** What delivery adds to a run's final record before it is saved. */
export type RunNotes = Pick<RunRecord, "notDelivered">;

/** As many paths as a prompt's `{{files}}` lists: a burst of thousands is counted, not kept. */
export const MAX_RECORDED_FILES = 100;

/** The fields a record keeps of a fire's changed paths; none for a fire without any. */
export function recordedFiles(files: readonly string[] | undefined): Pick<RunRecord, "files" | "moreFiles"> {
  if (files === undefined || files.length === 0) return {};
  const more = files.length - MAX_RECORDED_FILES;
  return { files: files.slice(0, MAX_RECORDED_FILES), ...(more > 0 ? { moreFiles: more } : {}) };
}

/** What became of a cancel: "no answer" when the daemon holding the run did not answer in time. */
export type CancelResult = "cancelled" | "not found" | "no answer";
