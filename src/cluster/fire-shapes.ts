import * as z from "zod";
import type { Job } from "../jobs/types.js";
import { isoTime } from "../store/quarantine.js";
import { RUN_STATUSES } from "../store/run-record.js";

/**
 * The run a daemon made of a fire, noted in the fire's queued job as each attempt starts and again
 * once it ended and queued its deliveries (`ended`, the status it ended with). A daemon that takes a
 * fire carrying one took it from a daemon that lost its hold mid-run.
 */
export const heldRunShape = z.object({
  id: z.string().min(1),
  node: z.string(),
  attempt: z.number().int().positive(),
  ended: z.enum(RUN_STATUSES).optional(),
});
export type HeldRun = z.infer<typeof heldRunShape>;

/** What a queued fire carries; checked when taken, as it may come from another countd version. */
export const fireShape = z.object({
  job: z.string().min(1),
  reason: z.enum(["schedule", "catch-up"]),
  scheduledAt: isoTime,
  run: heldRunShape.optional(),
});
export type QueuedFire = z.infer<typeof fireShape>;

/**
 * The fire a node runs of `data` as read from Redis, or why it refuses it: only a job it loaded
 * itself (the heartbeat only where countd.yaml enables it), and
 * nothing but the job's name, reason and slot taken from Redis: a prompt, payload or tools there
 * are not read, the job's own are used.
 */
export function ownFire(data: unknown, job: (name: string) => Job | undefined): QueuedFire | { refused: string } {
  const parsed = fireShape.safeParse(data);
  if (!parsed.success)
    return {
      refused: `not a fire this countd can read (${parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")})`,
    };
  if (!job(parsed.data.job)) return { refused: `job "${parsed.data.job}" is not a job this node loaded` };
  return parsed.data;
}
