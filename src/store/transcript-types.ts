import type { Usage } from "../providers/types.js";

/*
 * The transcript's shapes alone, with no code: the console's API sends them (console/protocol.ts)
 * and its page is type-checked against them, in a program that holds no Node module.
 */

/** A run's transcript: what the agent was asked, each step it took, and how it ended. */
export interface Transcript {
  /** The prompt as the job rendered it for this run (the user message). */
  prompt?: string;
  steps: TranscriptStep[];
  /** Why steps may be missing: the journal was not found (pruned, or never written), or parts of it cannot be used. */
  incomplete?: string;
  /** Typed output: the answer's value, valid against the job's output.schema; absent for a job without one or a run that failed. */
  output?: unknown;
}

/** `subagent`: the id of the subagent whose step it is (from its `subagent` step on); absent for the run's own. */
export type TranscriptStep =
  /** `html`: the text's Markdown as sanitised HTML, added by the console for its page. */
  | { kind: "text"; text: string; html?: string; subagent?: string }
  /** Typed output: the answer was not valid against output.schema, and the model was asked again with these errors. */
  | { kind: "repair"; errors: string[]; subagent?: string }
  /** A subagent began the task its parent's `spawn` call handed it; its steps follow. */
  | { kind: "subagent"; id: string; task: string }
  /**
   * A tool call waited for a person's yes: `asked` (the rule that matched, until when), then how it
   * was answered and by whom.
   */
  | {
      kind: "approval";
      id: string;
      event: "asked" | "approved" | "denied" | "expired";
      tool: string;
      rule?: string;
      expires_at?: string;
      via?: string;
      by?: string;
      note?: string;
    }
  /** One of the job's `verify:` checks on the answer (index from 0 in the list), and why it failed. */
  | { kind: "verify"; index: number; check: string; what: string; passed: boolean; reason?: string }
  | {
      kind: "tool";
      subagent?: string;
      call_id: string;
      name: string;
      arguments: unknown;
      result?: string;
      is_error?: boolean;
      duration_ms?: number;
      attempts?: number;
    }
  /** `cost`: USD, null when the model has no price. */
  | {
      kind: "llm";
      model: string;
      usage: Usage;
      cost?: number | null;
      duration_ms: number;
      finish_reason?: string;
      error?: string;
      subagent?: string;
      /** `summary`: the call that condensed older history into MEMORY.md before the run's own calls. */
      purpose?: "summary";
    };

/** A delivery of a run, as the outbox knows it. */
export interface RunDelivery {
  id: string;
  kind: string;
  /** Where it goes, without secrets: a mail's recipients, a webhook's URL without query string. */
  to: string;
  status: "pending" | "dead" | "delivered";
  /** Why a held delivery waits for its release (on_verify_fail: hold); it is pending, and sent only once released. */
  held?: string;
  attempts?: number;
  last_error?: string;
  next_attempt_at?: string;
  delivered_at?: string;
}
