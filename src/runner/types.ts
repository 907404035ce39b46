import type { Usage } from "../providers/types.js";

export type RunReason = "schedule" | "watch" | "heartbeat" | "manual" | "catch-up" | "retry";
export type RunStatus = "running" | "ok" | "error" | "timeout" | "cancelled" | "skipped" | "interrupted";

/** What a trigger hands the runner: which job, why, and when it was meant to start. */
export interface FireRequest {
  job: string;
  reason: RunReason;
  scheduledAt: Date;
  /** Changed paths, for watch-triggered runs. */
  files?: string[];
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
