import type { Usage } from "../providers/types.js";
import type { ToolCallReport } from "./loop.js";
import type { SuspendedMessage } from "../approvals/types.js";

/** How one agent run ended: what the executor returns, and the runner hands on with the final record. */
export interface RunOutcome {
  answer: string;
  /** `timeout` is never produced by the executor: the runner knows why it cancelled and says so. */
  status: "ok" | "error" | "timeout" | "cancelled" | "budget" | "waiting";
  iterations: number;
  toolCalls: number;
  /** Every call made for the run, its subagents' included. */
  usage: Usage;
  /** USD; null when a call's model has no price; undefined when the run was not metered (it made no call through a runtime). */
  cost?: number | null;
  /** The model of the run's last call. */
  model?: string;
  error?: string;
  /** The tool calls that ran, in order; none when absent (an executor that threw). */
  calls?: ToolCallReport[];
  /** The answer as one JSON value valid against the job's `output.schema`; absent for a job without one. */
  output?: unknown;
  /** The job's `verify:` checks that failed, when `on_verify_fail` still delivers (hold, deliver_flagged). */
  failedChecks?: string[];
  /** Status `waiting`: the call that waits for a person's yes, and where the run goes on from. */
  suspended?: SuspendedMessage;
}
