import type { Redactor } from "../audit/redact.js";
import { silentLogger, type Logger } from "../log.js";
import { errorText } from "../text.js";
import { fileSink, RunJournal } from "../store/run-journal.js";
import type { RunRecord } from "../store/run-record.js";
import type { JournalEntry, JournalInput } from "../store/journal-entries.js";
import type { Approval } from "../approvals/types.js";
import type { Upstream } from "../jobs/template.js";
import type { QueuedDelivery } from "../delivery/dispatch.js";
import type { RunnerOptions } from "./runner.js";
import type { RunOutcome } from "../agent/outcome.js";

/**
 * Every run's journal, from its fire to its end: opened around the executor (the fire), handed
 * down to the loop in the run's context (the prompt, LLM calls, tool calls, subagents), and
 * closed when the runner hands over the final record (the deliveries queued and the end). A fire
 * that never ran has no journal: its record says all there is.
 */
export class RunJournals {
  private readonly open = new Map<string, RunJournal>();
  /** When each text kept once was last written or touched, across this process's runs. */
  private readonly touched = new Map<string, number>();
  private readonly log: Logger;

  constructor(
    private readonly opts: {
      /** The state directory as configured now. */
      state: () => string;
      redactor: () => Redactor;
      node?: string;
      log?: Logger;
      /** A run going on after an answer: its journal so far is brought here first (a cluster's other node had it). */
      continueJournal?: (job: string, runId: string) => Promise<void>;
    },
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "journal" });
  }

  /** The executor with each run's journal opened first, its fire written. */
  executor(execute: RunnerOptions["execute"]): RunnerOptions["execute"] {
    return async (job, run) => {
      // Without the earlier part the journal still says what this part did: the run is not failed for it.
      if (run.request.resume)
        await this.opts
          .continueJournal?.(job.name, run.id)
          .catch((err: unknown) =>
            this.log.warn(
              { job: job.name, runId: run.id, error: errorText(err) },
              "could not bring the journal of the run's first part here",
            ),
          );
      const journal = new RunJournal(
        fileSink(this.opts.state(), job.name, run.id, this.touched),
        this.opts.redactor(),
        this.log.child({ job: job.name, runId: run.id }),
      );
      this.open.set(run.id, journal);
      const { reason, scheduledAt, files, payload, upstream, resume } = run.request;
      // A run going on after a person's answer: its journal goes on from the approval it waited for.
      if (resume) journal.write(answered(resume.approval));
      else
        journal.write({
          kind: "fire",
          job: job.name,
          run: run.id,
          reason,
          scheduled_at: scheduledAt.toISOString(),
          session: run.sessionId,
          ...(this.opts.node !== undefined ? { node: this.opts.node } : {}),
          ...(files ? { files } : {}),
          ...(payload !== undefined ? { payload } : {}),
          ...(upstream ? { upstream: journalledUpstream(upstream) } : {}),
        });
      return execute(job, { ...run, journal });
    };
  }

  /** The run waits for a person's yes: the request is written and the journal let go of until the run goes on. */
  async suspend(run: RunRecord, approval: Approval): Promise<void> {
    const journal = this.open.get(run.id);
    if (!journal) return;
    this.open.delete(run.id);
    const { id, tool, rule, expiresAt } = approval;
    journal.write({ kind: "approval", id, event: "asked", tool, rule, expires_at: expiresAt });
    await journal.close();
  }

  /** The run's end: the deliveries it queued (or why none), its status and counts; resolves once its journal is written. */
  async end(
    run: RunRecord,
    queued: readonly QueuedDelivery[],
    { answer, output }: Pick<RunOutcome, "answer" | "output">,
    notDelivered?: string,
  ): Promise<void> {
    const journal = this.open.get(run.id);
    if (!journal) return;
    this.open.delete(run.id);
    const ids = queued.flatMap((q) => q.ids);
    if (ids.length > 0)
      journal.write({ kind: "delivery", ids, messages: queued.map(({ ids, message, targets }) => ({ ids, message, targets })) });
    journal.write({
      kind: "end",
      status: run.status,
      ...(run.error !== undefined ? { error: run.error } : {}),
      answer,
      ...(notDelivered !== undefined ? { not_delivered: notDelivered } : {}),
      iterations: run.iterations,
      tool_calls: run.toolCalls,
      usage: run.usage,
      ...(run.cost !== undefined ? { cost: run.cost } : {}),
      ...(output !== undefined ? { output } : {}),
    });
    await journal.close();
  }
}

function answered(approval: Approval): JournalInput {
  const { id, tool, status, answer } = approval;
  const event = status === "waiting" ? "expired" : status;
  return {
    kind: "approval",
    id,
    event,
    tool,
    ...(answer ? { via: answer.via, by: answer.by, ...(answer.note ? { note: answer.note } : {}) } : {}),
  };
}

function journalledUpstream({
  job,
  runId,
  status,
  answer,
  output,
}: Upstream): NonNullable<Extract<JournalEntry, { kind: "fire" }>["upstream"]> {
  return { job, run: runId, status, answer, ...(output !== undefined ? { output } : {}) };
}
