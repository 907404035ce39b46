import * as z from "zod";
import type { DeliveryMessage } from "../delivery/message.js";
import { EMAIL_FOOTERS, WEBHOOK_FORMATS, type DeliveryTarget } from "../delivery/targets.js";
import { RUN_REASONS, RUN_STATUSES } from "./run-record.js";
import { count, isoTime as time } from "./quarantine.js";
import { usageShape } from "./run-history.js";

/** How long an acknowledged delivery's id is remembered, so the same delivery is not queued again. */
export const DELIVERED_KEPT_MS = 7 * 24 * 3_600_000;

/** One message to one target, from the moment it is queued until it is acknowledged or given up. */
export interface OutboxEntry {
  /** `<run id>:<target key>`: the idempotency key; the senders derive webhook-id and Message-ID from it. */
  id: string;
  target: DeliveryTarget;
  message: DeliveryMessage;
  /** Where the run's workspace is, for attachments resolved at send time. */
  workspace: string;
  /** ISO 8601, as are all times here. */
  createdAt: string;
  /** 24 h after creation, or after `countd outbox retry`; a failure past it is final. */
  giveUpAt: string;
  /** Journalled as each send starts and synced with its outcome: a crash can leave one attempt uncounted. */
  attempts: number;
  lastAttemptAt?: string;
  nextAttemptAt: string;
  status: "pending" | "dead";
  lastError?: string;
  /** Why it is held (the failed checks of `on_verify_fail: hold`): not attempted until released, dead at giveUpAt. */
  held?: string;
}

export interface DisabledTarget {
  at: string;
  /** What a delivery to it is marked dead with, e.g. "target disabled after HTTP 410". */
  reason: string;
}

export interface OutboxData {
  /** Pending and dead deliveries by id; acknowledged ones move to the delivered log. */
  entries: Record<string, OutboxEntry>;
  /** By target key. */
  disabledTargets: Record<string, DisabledTarget>;
}

export const emptyOutbox = (): OutboxData => ({ entries: {}, disabledTargets: {} });

/** The journal's file in the state directory. */
export const OUTBOX_FILE = "outbox.jsonl";

/**
 * One change to the outbox: the journal holds one line for each, in order, and the outbox is what
 * they add up to. A compaction writes the same records for what is still in play (an entry as
 * "queued" with its current fields), so there is one reader for both.
 */
export type OutboxRecord =
  | { op: "queued"; entry: OutboxEntry }
  /** Appended as the send it counts starts; synced with the attempt's outcome. */
  | { op: "attempt"; id: string; at: string }
  /** The acknowledgement: the entry leaves the outbox and its id is never queued or sent again for DELIVERED_KEPT_MS. */
  | { op: "delivered"; id: string; at: string; /** Absent in journals written before it was kept. */ attempts?: number }
  | { op: "failed"; id: string; error: string; retryAt: string }
  | { op: "dead"; id: string; error: string }
  /** `countd outbox release`: a held delivery is due now, with a fresh 24 h. */
  | { op: "released"; id: string; at: string; giveUpAt: string }
  /** `countd outbox retry`: pending again, with a fresh schedule and a fresh 24 h. */
  | { op: "retried"; id: string; at: string; giveUpAt: string }
  | { op: "purged"; id: string }
  | { op: "disabled"; target: string; at: string; reason: string }
  | { op: "enabled"; target: string };

const strings = z.array(z.string());
const targetShape = z.discriminatedUnion("kind", [
  z.looseObject({
    kind: z.literal("email"),
    to: strings,
    cc: strings,
    bcc: strings,
    subject: z.string().optional(),
    attach: strings,
    footer: z.enum(EMAIL_FOOTERS).optional(),
  }),
  z.looseObject({
    kind: z.literal("webhook"),
    url: z.string(),
    secret: z.string().optional(),
    format: z.enum(WEBHOOK_FORMATS),
    headers: z.record(z.string(), z.string()),
  }),
]) satisfies z.ZodType<DeliveryTarget>;
const messageShape = z.looseObject({
  kind: z.enum(["run.completed", "run.failed", "run.recovered", "heartbeat", "approval.requested"]),
  job: z.string(),
  run: z.looseObject({
    id: z.string(),
    reason: z.enum(RUN_REASONS),
    status: z.enum(RUN_STATUSES),
    startedAt: time,
    finishedAt: time,
    durationMs: z.number(),
    usage: usageShape,
    // Entries queued before pricing have none: their cost is not known.
    cost: z.number().nonnegative().nullable().default(null),
  }),
  result: z.string(),
  error: z.string().optional(),
  lastToolCalls: z.array(z.looseObject({ name: z.string(), status: z.enum(["ok", "error"]), summary: z.string() })).optional(),
  failing: z.looseObject({ since: time, failures: z.number().int().nonnegative(), unreported: z.number().int().nonnegative() }).optional(),
  failedChecks: z.array(z.string()).optional(),
  approval: z
    .looseObject({
      id: z.string(),
      tool: z.string(),
      arguments: z.unknown(),
      rule: z.string(),
      reasoning: z.string(),
      askedAt: time,
      expiresAt: time,
      onTimeout: z.enum(["deny", "fail"]),
      links: z.looseObject({ approve: z.string(), deny: z.string() }).optional(),
    })
    .optional(),
}) satisfies z.ZodType<DeliveryMessage>;
/** An entry as the outbox writes it: every field the senders and the retry schedule read. */
export const entryShape = z.looseObject({
  id: z.string().min(1),
  target: targetShape,
  message: messageShape,
  workspace: z.string(),
  createdAt: time,
  giveUpAt: time,
  attempts: count,
  lastAttemptAt: time.optional(),
  nextAttemptAt: time,
  status: z.enum(["pending", "dead"]),
  lastError: z.string().optional(),
  held: z.string().optional(),
}) satisfies z.ZodType<OutboxEntry>;
export const disabledShape = z.looseObject({ at: time, reason: z.string() }) satisfies z.ZodType<DisabledTarget>;

const id = z.string().min(1);
export const recordShape = z.discriminatedUnion("op", [
  z.object({ op: z.literal("queued"), entry: entryShape }),
  z.object({ op: z.literal("attempt"), id, at: time }),
  z.object({ op: z.literal("delivered"), id, at: time, attempts: count.optional() }),
  z.object({ op: z.literal("failed"), id, error: z.string(), retryAt: time }),
  z.object({ op: z.literal("dead"), id, error: z.string() }),
  z.object({ op: z.literal("retried"), id, at: time, giveUpAt: time }),
  z.object({ op: z.literal("released"), id, at: time, giveUpAt: time }),
  z.object({ op: z.literal("purged"), id }),
  z.object({ op: z.literal("disabled"), target: z.string(), at: time, reason: z.string() }),
  z.object({ op: z.literal("enabled"), target: z.string() }),
]) satisfies z.ZodType<OutboxRecord>;
