import type { Redactor } from "../audit/redact.js";
import type { RunOutcome } from "../agent/outcome.js";
import { errorText } from "../text.js";
import type { RunnerOptions } from "./runner.js";

/**
 * A run's outcome redacted as it leaves the agent, before the runner records it or the dispatcher
 * queues it: a provider's error quoting its key, or an answer repeating a secret a tool read, is
 * stored and sent as `[REDACTED]` everywhere (run records, `countd history`, on_failure, the
 * outbox). A thrown error that quotes a secret is replaced by one with the redacted message: the
 * runner records only an error's text.
 */
export function redactedExecutor(execute: RunnerOptions["execute"], redactor: () => Redactor): RunnerOptions["execute"] {
  return async (job, run) => {
    try {
      return redactor().redactStrings<RunOutcome>(await execute(job, run));
    } catch (err) {
      const text = errorText(err);
      const safe = redactor().redact(text);
      if (safe === text) throw err;
      throw new Error(safe);
    }
  };
}
