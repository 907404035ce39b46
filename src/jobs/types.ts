import type { BudgetCaps } from "../cost/caps.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import type { BreakerLimits } from "../agent/breaker.js";
import type { Check, OnVerifyFail } from "./verify-schema.js";
import type { RunStatus } from "../store/run-record.js";
import type { OutputSpec } from "./output-schema.js";
import type { ApproveSettings } from "../approvals/rules.js";

/** A job as the rest of countd sees it: validated, defaults applied, durations in milliseconds. */
export type Schedule = { kind: "cron"; expression: string } | { kind: "every"; intervalMs: number } | { kind: "at"; date: Date };

export type WatchEvent = "add" | "change" | "unlink";

/** What a job's `watch:` asks for; triggers/watch.ts's WatchTrigger is what acts on it. */
export interface WatchSpec {
  /** Globs, absolute after loading (relative ones are taken from the workspace). */
  paths: string[];
  events: WatchEvent[];
  debounceMs: number;
}

/** What a job's `webhook:` asks for; triggers/webhook.ts acts on it. */
export interface WebhookSpec {
  /** As written: a `${VAR}` reference, filled in from the environment at each request (delivery/secrets.ts). */
  secret: string;
  /** Bytes. */
  maxBody: number;
  /** Requests a minute. */
  rate: number;
}

/** What a job's `after:` asks for; triggers/after.ts acts on it. */
export interface AfterSpec {
  /** The upstream job's name. */
  job: string;
  /** The ends of an upstream run that fire this job. */
  statuses: RunStatus[];
}

export type OverlapPolicy = "skip" | "queue" | "replace" | "allow";

/**
 * always: every answer is delivered; non_empty: not an empty answer, nor one that is exactly
 * NO_REPLY; changed: not an answer the same as the last one delivered (delivery/changed.ts).
 */
export type DeliverWhen = "always" | "non_empty" | "changed";

export interface JobOverrides {
  provider?: string;
  model?: string;
  temperature?: number;
  maxTokens?: number;
  maxIterations?: number;
  /** false: no breaker; limits: over countd.yaml's agent.breaker; undefined: countd.yaml's. */
  breaker?: false | Partial<BreakerLimits>;
}

export interface Job {
  name: string;
  /** Absolute path of the job file. */
  file: string;
  description?: string;
  enabled: boolean;
  schedule?: Schedule;
  watch?: WatchSpec;
  webhook?: WebhookSpec;
  after?: AfterSpec;
  /** IANA name: the job's own, else countd.yaml's, else the system's. */
  timezone: string;
  /** Template: {{date}}, {{time}}, {{job.name}}, {{files}}, … are filled in per run. */
  prompt: string;
  /** isolated: a fresh session per run (cron:<job>:<run>); shared: one session (cron:<job>). */
  session: "isolated" | "shared";
  overrides: JobOverrides;
  /** The only tools the job may use; undefined: every enabled tool. */
  tools?: string[];
  timeoutMs: number;
  overlap: OverlapPolicy;
  /** After downtime, one run if a slot was missed within this window; 0 = never. */
  catchUpMs: number;
  retry: { attempts: number; backoffMs: number };
  /** Caps on what its runs spend; undefined: none but countd.yaml's daily budget. */
  budget?: BudgetCaps;
  /** Where a successful run's answer goes. `${VAR}` references stay unresolved (see delivery/secrets.ts). */
  deliver: DeliveryTarget[];
  deliverWhen: DeliverWhen;
  /** With deliverWhen changed: the JSONPath whose values are compared, as a set, instead of the whole answer. */
  changedOn?: string;
  /** Typed output: the answer must be one JSON value valid against this schema (jobs/output-schema.ts). */
  output?: OutputSpec;
  /** Where a failed, timed-out or interrupted run is reported. */
  onFailure: DeliveryTarget[];
  /** While failures go on, the least time between two reports to onFailure; undefined (jobs not read from a file): 1 h, a job file's default. */
  onFailureRepeatMs?: number;
  /** Checks run on the answer before any delivery, and what a failed one does (src/runner/verify.ts). */
  verify?: { checks: Check[]; onFail: OnVerifyFail };
  /** Tool calls that wait for a person's yes (src/approvals/); undefined: countd.yaml's `approve:`, if any. */
  approve?: ApproveSettings;
  /** The heartbeat's job (jobs/heartbeat.ts): its answer is delivered as a check-in from `persona`, countd.yaml's persona.name. */
  checkIn?: { persona: string };
}
