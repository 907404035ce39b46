import type { Usage } from "../providers/types.js";
import type { ToolCallReport } from "./loop.js";

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
