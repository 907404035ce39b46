import { callHash, newApprovalId, type ApprovalAnswer } from "../approvals/links.js";
import type { ApproveSettings } from "../approvals/rules.js";
import type { Approval, ApprovalStore, SuspendedMessage, SuspendedRun } from "../approvals/types.js";
import type { RunDispatcher } from "../delivery/dispatch.js";
import type { EventBus } from "../events.js";
import type { Logger } from "../log.js";
import type { Job } from "../jobs/types.js";
import type { ChatMessage } from "../providers/types.js";
import type { RunRecord } from "../store/run-record.js";
import type { RunJournals } from "./journaled-run.js";

/** The most of the agent's reasoning a request shows: enough to see why it wants the call. */
const REASONING_CHARS = 2_000;

/** What a daemon gives its runs so one can wait for a person's yes (triggers/approvals.ts answers). */
export interface Approvals {
  store: ApprovalStore;
  /** The answer links, while a console serves them; undefined: the request says how to answer from the CLI. */
  links(approval: Approval): Record<ApprovalAnswer, string> | undefined;
}

/**
 * A run stopped at a call that needs a person's yes: the request and the run are kept (synced)
 * before anyone is asked, the journal says so, and the approvers get the request by the outbox.
 */
export async function suspendRun(
  job: Job,
  run: RunRecord,
  loop: SuspendedMessage,
  deps: {
    approve: ApproveSettings;
    approvals: Approvals;
    dispatcher: RunDispatcher;
    journals: RunJournals;
    events: EventBus;
    log: Logger;
    clockAt: Date;
    node?: string;
    now: Date;
  },
): Promise<Approval> {
  const { approve, approvals, now } = deps;
  const call = loop.pending[0]!;
  const args = call.arguments ?? call.rawArguments;
  const approval: Approval = {
    id: newApprovalId(),
    job: job.name,
    run: run.id,
    tool: call.name,
    arguments: args,
    hash: callHash(call.name, args),
    rule: loop.rule,
    askedAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + approve.timeout).toISOString(),
    onTimeout: approve.on_timeout,
    reasoning: reasoningOf(loop.messages),
    status: "waiting",
    ...(deps.node !== undefined ? { node: deps.node } : {}),
  };
  const suspended: SuspendedRun = {
    job: job.name,
    run: run.id,
    startedAt: run.startedAt,
    reason: run.reason,
    scheduledAt: run.scheduledAt,
    clockAt: deps.clockAt.toISOString(),
    ...(run.files ? { files: run.files } : {}),
    loop,
  };
  await approvals.store.add(approval, suspended);
  await deps.journals.suspend(run, approval);
  // Nobody named: the job's on_failure targets, who hear of its trouble anyway.
  const ask = approve.ask ?? job.onFailure;
  // countd validate reports such a job; one running anyway must not wait unseen until its timeout.
  if (ask.length === 0)
    deps.log.warn(
      { job: job.name, runId: run.id, approval: approval.id, expiresAt: approval.expiresAt },
      "a run waits for an approval and nobody is asked (no approve.ask, no on_failure targets): countd approvals lists it",
    );
  await deps.dispatcher.ask(job, run, approval, approvals.links(approval), ask);
  deps.events.emit("run.waiting", { run: { ...run }, approval });
  return approval;
}

/** What the agent said and thought on its way to the call, last first kept: the person reads it before answering. */
function reasoningOf(messages: readonly ChatMessage[]): string {
  const said = messages
    .filter((message) => message.role === "assistant")
    .map((message) => [message.reasoning?.text, typeof message.content === "string" ? message.content : undefined])
    .flat()
    .filter((text): text is string => typeof text === "string" && text.trim() !== "")
    .join("\n\n");
  return said.length <= REASONING_CHARS ? said : `…${said.slice(-(REASONING_CHARS - 1))}`;
}
