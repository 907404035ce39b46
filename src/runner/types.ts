import type { CancelToken } from "../agent/cancel.js";
import type { RunReason } from "../store/run-record.js";
import type { RunClock } from "../time.js";
import type { Tool } from "../tools/types.js";
import type { JournalWriter } from "../store/journal-entries.js";
import type { Upstream } from "../jobs/template.js";
import type { Approval, SuspendedRun } from "../approvals/types.js";
import type { ApprovalDecision } from "../agent/loop.js";

/** What a trigger hands the runner: which job, why, and when it was meant to start. */
export interface FireRequest {
  job: string;
  reason: RunReason;
  scheduledAt: Date;
  /** Changed paths, for watch-triggered runs. */
  files?: string[];
  /** A webhook-triggered run's request body, as it came (UTF-8 text, bounded by the job's max_body). */
  payload?: string;
  /** A run that is no job file's (the heartbeat's) brings its prompt, used instead of the job's. */
  prompt?: string;
  /** Tools only this run has, such as the heartbeat's reply tool. */
  extraTools?: Tool[];
  /** The instant the run's placeholders read instead of its start: a rehearsal's `--at`, a replay's recorded start. */
  at?: Date;
  /** An `after:` fire's upstream run (triggers/after.ts), which the prompt's `{{upstream.…}}` read. */
  upstream?: Upstream;
  /** A run that waited for a person's yes goes on (src/triggers/approvals.ts): same id, same start, its loop where it stopped. */
  resume?: { run: SuspendedRun; decision: ApprovalDecision; approval: Approval };
}

/** What the executor gets for one run. */
export interface RunContext {
  id: string;
  sessionId: string;
  request: FireRequest;
  /** The run's start in its job's zone: every placeholder of the run reads it. */
  clock: RunClock;
  /** Fires on timeout, replacement or shutdown; the executor must return soon after it does. */
  cancel: CancelToken;
  /** The run's journal (runner/journaled-run.ts opens it around the executor). */
  journal?: JournalWriter;
}
