import type { CancelToken } from "../agent/cancel.js";
import { addCost, addUsage, emptyUsage, type Usage } from "../providers/types.js";
import type { AgentLoop, ProcessOptions } from "../agent/loop.js";
import { renderPrompt, type Upstream } from "../jobs/template.js";
import type { Job } from "../jobs/types.js";
import type { Runtime } from "../runtime.js";
import type { RunContext } from "./types.js";
import type { RunOutcome } from "../agent/outcome.js";
import { frameUntrusted } from "../tools/untrusted.js";
import type { Budgets, RunSpend } from "../cost/budget.js";
import type { RunClock } from "../time.js";
import type { JournalWriter } from "../store/journal-entries.js";
import type { OutputSpec } from "../jobs/output-schema.js";
import { runCheckCommand } from "../tools/check-command.js";
import { verifiedOutcome } from "./verify.js";

/**
 * Runs one job prompt through the agent loop and returns how it ended, with the loop's own
 * report: its counts are right also when the run fails. A run that hit the iteration or
 * tool-call limit is `ok`: its answer ends with the limit notice.
 */
export async function runAgent(
  loop: AgentLoop,
  prompt: string,
  sessionId: string,
  cancel: CancelToken,
  run?: { id: string; clock: RunClock; journal?: JournalWriter; canWait?: boolean },
  spend?: RunSpend,
  output?: OutputSpec,
  resume?: ProcessOptions["resume"],
): Promise<RunOutcome> {
  const { answer, report } = await loop.settle(prompt, sessionId, {
    channel: "cron",
    cancelToken: cancel,
    ...(run?.canWait ? { canWait: true } : {}),
    ...(resume ? { resume } : {}),
    ...(output ? { output } : {}),
    ...(run ? { runId: run.id, clock: run.clock } : {}),
    ...(run?.journal ? { journal: run.journal } : {}),
  });
  const { iterations, toolCalls, calls } = report;
  // The run's spending counts its subagents' calls too, which the loop's report does not.
  const spent = spend && (resume ? before(resume.from, spend) : spend);
  const counts = spent
    ? { iterations, toolCalls, calls, usage: spent.usage, cost: spent.cost, ...(spend?.model ? { model: spend.model } : {}) }
    : { iterations, toolCalls, calls, usage: report.usage };
  // What was said before the cap stays: in the transcript, and as the run's partial answer.
  if (report.status === "budget") return { answer, status: "budget", error: report.error ?? "budget", ...counts };
  if (report.status === "error") {
    // An error raised by the cancel itself (an aborted request) is the cancel, not a failure.
    if (cancel.cancelled) return { answer: "", status: "cancelled", ...counts };
    return { answer: "", status: "error", error: report.error ?? "error", ...counts };
  }
  if (report.status === "cancelled") return { answer, status: "cancelled", ...counts };
  if (report.status === "waiting") return { answer: "", status: "waiting", suspended: report.suspended!, ...counts };
  if (!output) return { answer, status: "ok", ...counts };
  // The loop yielded only the valid attempt, as indented JSON.
  if (report.output) return { answer, status: "ok", output: report.output.value, ...counts };
  return { answer, status: "error", error: "no answer valid against output.schema: the run reached its iteration limit first", ...counts };
}

/** A run going on after a person's yes also spent what it had spent before it waited. */
function before(from: { usage: Usage; cost: number | null }, spend: RunSpend): { usage: Usage; cost: number | null } {
  const usage = emptyUsage();
  addUsage(usage, from.usage);
  addUsage(usage, spend.usage);
  return { usage, cost: addCost(from.cost, spend.cost) };
}

/** How the runner runs a job: the job's own loop (tools, overrides) on its rendered prompt, or on the prompt the fire brought. */
export function jobExecutor(
  runtime: () => Pick<Runtime, "loop" | "config" | "events">,
  budgets: Budgets,
  /** Whether a run can wait for a person's yes (a daemon's, `countd run`'s); else a call that needs one is refused. */
  canWait = false,
): (job: Job, run: RunContext) => Promise<RunOutcome> {
  return async (job, run) => {
    const { prompt, extraTools, files, payload, upstream, resume } = run.request;
    const spend = budgets.forRun(job, run.id);
    const { config, events } = runtime();
    const approve = job.approve ?? config.approve;
    const loop = runtime().loop({ toolNames: job.tools, overrides: job.overrides, extraTools, spend, ...(approve ? { approve } : {}) });
    const first = await runAgent(
      loop,
      prompt ??
        renderPrompt(job.prompt, {
          clock: run.clock,
          job,
          runId: run.id,
          ...(files ? { files } : {}),
          ...(payload !== undefined ? { payload: framedPayload(payload) } : {}),
          ...(upstream ? { upstream: { run: upstream, framed: (text: string) => framedUpstream(upstream, text) } } : {}),
        }),
      run.sessionId,
      run.cancel,
      // A check-in answers through its reply tool, which a run going on later would not have: it never waits.
      { ...run, canWait: canWait && job.checkIn === undefined },
      spend,
      job.output,
      resume && { from: resume.run.loop, decision: resume.decision },
    );
    if (first.status === "waiting") return first;
    // The checks and a retry belong to the run: the same loop, conversation, spend and journal.
    return verifiedOutcome(first, {
      job,
      runId: run.id,
      events,
      ...(run.journal ? { journal: run.journal } : {}),
      command: (command, answer, output) => runCheckCommand(config, command, answer, output, run.cancel.signal),
      again: (feedback) => runAgent(loop, feedback, run.sessionId, run.cancel, run, spend, job.output),
    });
  };
}

/** Whoever can sign a request wrote the body, not the job's owner: it is data, never instructions. */
export function framedPayload(payload: string): string {
  return frameUntrusted("the webhook request that fired this run", payload);
}

/** The upstream run's answer and output were written by a model that may have read anything: data, never instructions. */
function framedUpstream(upstream: Upstream, text: string): string {
  return frameUntrusted(`the answer of run ${upstream.runId} of the job "${upstream.job}"`, text);
}
