import type { RunOutcome } from "../../src/agent/outcome.js";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunContext } from "../../src/runner/types.js";

/** One call of the executor, held open until the test finishes it or the runner cancels it. */
export interface Call {
  job: Job;
  run: RunContext;
  finish(outcome?: Partial<RunOutcome>): void;
}

/** The runner's boundary, under the test's control: records every call and how many ran at once. */
export function heldExecutor() {
  const calls: Call[] = [];
  let inFlight = 0;
  const stats = { maxInFlight: 0 };
  const execute = (job: Job, run: RunContext) =>
    new Promise<RunOutcome>((resolve) => {
      inFlight++;
      stats.maxInFlight = Math.max(stats.maxInFlight, inFlight);
      let settled = false;
      const finish = (outcome: Partial<RunOutcome> = {}) => {
        if (settled) return;
        settled = true;
        inFlight--;
        resolve({ answer: `${job.name} done`, status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage(), ...outcome });
      };
      // A run cancelled before it reached the executor (shutdown while its first record was saved)
      // never hears "abort": the loop it stands for checks the token before its first step.
      if (run.cancel.cancelled) finish({ answer: "", status: "cancelled" });
      else run.cancel.signal.addEventListener("abort", () => finish({ answer: "", status: "cancelled" }));
      calls.push({ job, run, finish });
    });
  return { calls, execute, stats };
}
