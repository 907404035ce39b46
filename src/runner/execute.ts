import type { CancelToken } from "../agent/cancel.js";
import type { AgentLoop } from "../agent/loop.js";
import type { CountdEvents } from "../events.js";
import { renderPrompt } from "../jobs/template.js";
import type { Job } from "../jobs/types.js";
import { emptyUsage, type Usage } from "../providers/types.js";
import type { Runtime } from "../runtime.js";
import type { RunContext } from "./runner.js";

/** How one agent run ended, as the runner records it. */
export interface RunOutcome {
  answer: string;
  /** `timeout` is never produced here: the runner knows why it cancelled and says so. */
  status: "ok" | "error" | "timeout" | "cancelled";
  iterations: number;
  toolCalls: number;
  usage: Usage;
  error?: string;
}

/**
 * Runs one job prompt through the agent loop. The counts come from the loop's own
 * `message.finished` report for this session, so they are right also when the run fails. A run
 * that hit the iteration or tool-call limit is `ok`: its answer ends with the limit notice.
 */
export async function runAgent(loop: AgentLoop, prompt: string, sessionId: string, cancel: CancelToken): Promise<RunOutcome> {
  let report: CountdEvents["message.finished"] | undefined;
  const off = loop.events.on("message.finished", (event) => {
    if (event.sessionId === sessionId) report = event;
  });
  const counts = () => ({
    iterations: report?.iterations ?? 0,
    toolCalls: report?.toolCalls ?? 0,
    usage: report?.usage ?? emptyUsage(),
  });
  try {
    const answer = await loop.processDirect(prompt, sessionId, { channel: "cron", cancelToken: cancel });
    return { answer, status: report?.status === "cancelled" ? "cancelled" : "ok", ...counts() };
  } catch (err) {
    // An error raised by the cancel itself (an aborted request) is the cancel, not a failure.
    if (cancel.cancelled) return { answer: "", status: "cancelled", ...counts() };
    return { answer: "", status: "error", error: err instanceof Error ? err.message : String(err), ...counts() };
  } finally {
    off();
  }
}

/** How the runner runs a job: the job's own loop (tools, overrides) on its rendered prompt. */
export function jobExecutor(runtime: () => Pick<Runtime, "loop">): (job: Job, run: RunContext) => Promise<RunOutcome> {
  return (job, run) =>
    runAgent(
      runtime().loop({ toolNames: job.tools, overrides: job.overrides }),
      renderPrompt(job.prompt, {
        now: new Date(),
        timezone: job.timezone,
        job,
        runId: run.id,
        ...(run.request.files ? { files: run.request.files } : {}),
      }),
      run.sessionId,
      run.cancel,
    );
}
