import type { Usage } from "../providers/types.js";
import type { RunReason, RunStatus } from "../store/run-record.js";

/**
 * `test`: what `countd test-delivery` sends; it never goes through the outbox, and no run stands behind it.
 * `approval.requested`: a waiting run asks a person to approve or deny one tool call.
 */
export type DeliveryKind = "run.completed" | "run.failed" | "run.recovered" | "heartbeat" | "approval.requested" | "test";

/** What an approval request shows of the call that waits (an Approval of src/approvals/types.ts, as sent). */
export interface ApprovalRequest {
  id: string;
  tool: string;
  /** Whole, as the agent gave them: the person must see everything they allow. */
  arguments: unknown;
  /** The rule that matched, as written. */
  rule: string;
  /** The agent's reasoning so far, an excerpt. */
  reasoning: string;
  /** ISO 8601. */
  askedAt: string;
  /** ISO 8601: no answer by then, and `onTimeout` decides. */
  expiresAt: string;
  onTimeout: "deny" | "fail";
  /** The signed answer links, while the daemon serves a console. */
  links?: { approve: string; deny: string };
}

export interface ToolCallSummary {
  name: string;
  status: "ok" | "error";
  /** One line: what was called and what came of it. */
  summary: string;
}

/**
 * What every sender is given: one run's outcome. The webhook `json` format sends `kind` as `type`,
 * `job`, `run` and `result` as they are, so these fields are a public wire format.
 */
export interface DeliveryMessage {
  kind: DeliveryKind;
  job: string;
  run: {
    id: string;
    reason: RunReason;
    status: RunStatus;
    /** ISO 8601. */
    startedAt: string;
    /** ISO 8601. */
    finishedAt: string;
    durationMs: number;
    usage: Usage;
    /** USD; null when a call's model has no price or the run recorded none (it never started, or an entry queued before pricing). */
    cost: number | null;
  };
  /**
   * The job's IANA zone: a mail subject's {{date}} and {{time}} are `run.startedAt` in it, as the
   * prompt's were. Absent on entries queued by an older countd, which showed countd.yaml's zone.
   */
  timezone?: string;
  /** The answer, markdown. */
  result: string;
  /** Typed output (a job's `output.schema`): the answer's JSON value; on run.completed only. */
  output?: unknown;
  /** A heartbeat check-in's sender, persona.name: it names the check-in the way a job's name names its report. */
  persona?: string;
  /** Why the run failed (run.failed). */
  error?: string;
  /** The run's last tool calls, oldest first (run.failed), so the reader sees where it stopped. */
  lastToolCalls?: ToolCallSummary[];
  /**
   * The run's page in the daemon's console (run.failed), when the daemon serves one. Not in the
   * json webhook format: its receivers build links from `job` and `run.id` as they choose.
   */
  consoleUrl?: string;
  /**
   * The job's failures since its last success: on a "still failing" run.failed and on
   * run.recovered (the first failure's report has none).
   */
  failing?: FailingSummary;
  /** The job's `verify:` checks that failed (run.completed, `on_verify_fail: deliver_flagged`): shown as a "failed checks: …" line. */
  failedChecks?: string[];
  /** The call that waits (approval.requested); `run` is then the waiting run. */
  approval?: ApprovalRequest;
}

export interface FailingSummary {
  /** ISO 8601: when the first failure finished. */
  since: string;
  /** Failed runs since the last success. */
  failures: number;
  /** Of those, the ones on_failure was not told about (on_failure_repeat). */
  unreported: number;
}
