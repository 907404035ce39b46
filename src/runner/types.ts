import type { CancelToken } from "../agent/cancel.js";
import type { ToolCallReport } from "../agent/loop.js";
import type { Usage } from "../providers/types.js";
import type { Tool } from "../tools/types.js";

/** The heartbeat's runs are recorded under this name, which no job file can take (a job name starts with a letter or digit). */
export const HEARTBEAT_JOB = "@heartbeat";

export const RUN_REASONS = ["schedule", "watch", "heartbeat", "manual", "catch-up", "retry"] as const;
export type RunReason = (typeof RUN_REASONS)[number];
export const RUN_STATUSES = ["running", "ok", "error", "timeout", "cancelled", "skipped", "interrupted"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** What a trigger hands the runner: which job, why, and when it was meant to start. */
export interface FireRequest {
  job: string;
  reason: RunReason;
  scheduledAt: Date;
  /** Changed paths, for watch-triggered runs. */
  files?: string[];
  /** A run that is no job file's (the heartbeat's) brings its prompt, used instead of the job's. */
  prompt?: string;
  /** Tools only this run has, such as the heartbeat's reply tool. */
  extraTools?: Tool[];
}

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
  usage: Usage;
  /** The answer, cut to a few hundred characters. */
  resultExcerpt?: string;
  error?: string;
  sessionId: string;
}

/** What the executor gets for one run. */
export interface RunContext {
  id: string;
  sessionId: string;
  request: FireRequest;
  /** Fires on timeout, replacement or shutdown; the executor must return soon after it does. */
  cancel: CancelToken;
}

/** How one agent run ended: what the executor returns, and the runner hands on with the final record. */
export interface RunOutcome {
  answer: string;
  /** `timeout` is never produced by the executor: the runner knows why it cancelled and says so. */
  status: "ok" | "error" | "timeout" | "cancelled";
  iterations: number;
  toolCalls: number;
  usage: Usage;
  error?: string;
  /** The tool calls that ran, in order; none when absent (an executor that threw). */
  calls?: ToolCallReport[];
}
