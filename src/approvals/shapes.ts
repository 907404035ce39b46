import * as z from "zod";
import { chatMessageShape, toolCallShape } from "../sessions/message-shape.js";
import { count, isoTime, problemOf } from "../store/quarantine.js";
import { ON_TIMEOUT } from "./rules.js";
import type { Approval, SuspendedRun } from "./types.js";

/**
 * What the approvals' files hold, checked as they are read: a file may be damaged by a crash of
 * another tool, a full disk or a hand, and one such file must not stop the others being read.
 */

const answeredBy = {
  via: z.enum(["link", "cli", "console", "timeout"]),
  by: z.string(),
  note: z.string().optional(),
};

/** The answer kept for an approval: `<id>.answer.json`. */
export const answerShape = z.object({ answer: z.enum(["approve", "deny", "timeout"]), ...answeredBy, at: isoTime });

export const approvalShape = z.object({
  id: z.string(),
  job: z.string(),
  run: z.string(),
  tool: z.string(),
  arguments: z.unknown(),
  hash: z.string(),
  rule: z.string(),
  askedAt: isoTime,
  expiresAt: isoTime,
  onTimeout: z.enum(ON_TIMEOUT),
  reasoning: z.string(),
  status: z.enum(["waiting", "approved", "denied", "expired"]),
  answer: answerShape.optional(),
  node: z.string().optional(),
}) satisfies z.ZodType<Approval>;

const usage = z.object({
  inputTokens: count,
  outputTokens: count,
  cachedInputTokens: count,
  cacheWriteTokens: count,
  estimatedTokens: count.optional(),
});

export const suspendedRunShape = z.object({
  job: z.string(),
  run: z.string(),
  startedAt: isoTime,
  reason: z.string(),
  scheduledAt: isoTime,
  clockAt: isoTime,
  files: z.array(z.string()).optional(),
  loop: z.object({
    message: z.string(),
    said: z.string(),
    rule: z.string(),
    messages: z.array(chatMessageShape),
    transcript: z.array(chatMessageShape),
    pending: z.array(toolCallShape),
    iterations: count,
    toolCalls: count,
    usage,
    cost: z.number().nullable(),
    calls: z.array(z.object({ name: z.string(), arguments: z.unknown(), isError: z.boolean(), result: z.string() })),
    activeMs: z.number().nonnegative(),
  }),
}) satisfies z.ZodType<SuspendedRun>;

/** An approval's status once answered so. */
export const ANSWERED_STATUS = { approve: "approved", deny: "denied", timeout: "expired" } as const;

/** A stored value read back: the value if it fits `shape`, or what is wrong with it (damaged files and keys are skipped, said once). */
export function readStored<T>(text: string, shape: z.ZodType<T>): { value: T } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { problem: `not valid JSON: ${(err as Error).message}` };
  }
  const parsed = shape.safeParse(value);
  return parsed.success ? { value: parsed.data } : { problem: `does not fit: ${problemOf(parsed.error)}` };
}
