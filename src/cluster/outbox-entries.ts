import type { Job as QueuedJob, JobsOptions } from "bullmq";
import { DELIVERED_KEPT_MS, disabledShape, entryShape, type DisabledTarget, type OutboxEntry } from "../store/outbox-shapes.js";
import { isoTime } from "../store/quarantine.js";

/* The cluster's deliveries as BullMQ jobs: what one carries, its options, and how it is shown. */

const iso = (ms: number) => new Date(ms).toISOString();

/** BullMQ counts attempts; countd's rule is the 24 h of GIVE_UP_AFTER_MS, so the count never ends a delivery. */
const UNCOUNTED_ATTEMPTS = 1_000_000;
/**
 * What a queued delivery carries: the message and where it goes, with when it was queued and when
 * it is given up; `retryAt`, once an attempt failed. Checked when read, as it may come from another
 * countd version.
 */
export const dataShape = entryShape
  .pick({ target: true, message: true, workspace: true, createdAt: true, giveUpAt: true, held: true })
  .extend({ retryAt: isoTime.optional() });
export type DeliveryData = Pick<OutboxEntry, "target" | "message" | "workspace" | "createdAt" | "giveUpAt" | "held"> & { retryAt?: string };

/** BullMQ's options for every delivery: countd's schedule decides when and for how long it is retried. */
export function jobOptions(): JobsOptions {
  return {
    attempts: UNCOUNTED_ATTEMPTS,
    backoff: { type: "countd" },
    removeOnComplete: { age: DELIVERED_KEPT_MS / 1000 },
    removeOnFail: false,
  };
}

/** A queued delivery as `countd outbox` and the console show one. */
export function entryOf(job: QueuedJob, data: DeliveryData, status: OutboxEntry["status"]): OutboxEntry {
  return {
    id: job.id!,
    target: data.target,
    message: data.message,
    workspace: data.workspace,
    createdAt: data.createdAt,
    giveUpAt: data.giveUpAt,
    attempts: job.attemptsMade,
    ...(job.processedOn ? { lastAttemptAt: iso(job.processedOn) } : {}),
    nextAttemptAt: data.retryAt ?? data.createdAt,
    status,
    ...(job.failedReason ? { lastError: job.failedReason } : {}),
    ...(data.held !== undefined ? { held: data.held } : {}),
  };
}

/** A disabled target's entry; one that does not read still disables it. */
export function parseDisabled(text: string): DisabledTarget {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const parsed = disabledShape.safeParse(value);
  return parsed.success ? parsed.data : { at: iso(0), reason: "target disabled" };
}
