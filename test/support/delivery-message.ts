import type { DeliveryMessage } from "../../src/delivery/message.js";
import type { Usage } from "../../src/providers/types.js";
import type { RunReason } from "../../src/store/run-record.js";

/**
 * The message of a completed run, as the dispatcher builds it: what tests hand the outbox and the
 * senders. Only what a test looks at is given; the run ended `durationMs` after it started.
 */
export function completedMessage(opts: {
  job: string;
  runId: string;
  startedAt: string;
  result: string;
  durationMs?: number;
  reason?: RunReason;
  usage?: Usage;
  /** USD; null for an unpriced model. */
  cost?: number | null;
}): DeliveryMessage {
  const durationMs = opts.durationMs ?? 60_000;
  return {
    kind: "run.completed",
    job: opts.job,
    run: {
      id: opts.runId,
      reason: opts.reason ?? "schedule",
      status: "ok",
      startedAt: opts.startedAt,
      finishedAt: new Date(Date.parse(opts.startedAt) + durationMs).toISOString(),
      durationMs,
      usage: opts.usage ?? { inputTokens: 1200, outputTokens: 300, cachedInputTokens: 0, cacheWriteTokens: 0 },
      cost: opts.cost === undefined ? 0.0123 : opts.cost,
    },
    result: opts.result,
  };
}
