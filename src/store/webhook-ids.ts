import { createHash } from "node:crypto";
import { join } from "node:path";
import * as z from "zod";
import { writeFileDurably } from "./durable.js";
import { appendJsonLines, readJsonLines, toJsonLines } from "./jsonl.js";

/** How long a `webhook-id` is remembered: senders retry for about a day (Standard Webhooks' schedule ends within it). */
export const SEEN_FOR_MS = 24 * 3_600_000;
/**
 * Ids kept at most, over all secrets; past it the oldest are forgotten first. Far above what the
 * per-job rate lets in over a day for a few jobs, and small enough (some 10 MB) to hold in memory.
 */
const MAX_KEPT = 100_000;

const FILE = "webhook-ids.jsonl";

/** `secret`: a hash of the secret the request was signed with. */
const line = z.object({
  secret: z.string(),
  job: z.string(),
  id: z.string(),
  at: z.number(),
  run: z.string().optional(),
  skipped: z.literal(true).optional(),
});
type Line = z.infer<typeof line>;

export interface Seen {
  /** The job the id was sent to. */
  job: string;
  /** Epoch milliseconds the id was first taken. */
  at: number;
  /** The run the id fired; undefined while that fire waits in the queue. */
  run?: string;
  /** The job's overlap policy skipped it: the sender may retry it to that job, and to no other. */
  skipped?: true;
}

/**
 * The `webhook-id`s that fired a job in the last 24 hours, so that a sender's retry never runs a
 * job twice, also across a restart. Kept per secret, not per job: the signature does not cover the
 * job, so a request taken by one job must not fire another that shares its secret. An append-only JSON Lines file (one line when an id fires, one
 * more when its queued run gets an id), synced before the answer goes out, rewritten without the
 * expired lines when the daemon opens it: state.json is rewritten whole at every change, which
 * would cost a write of every id per request.
 */
export class WebhookIds {
  private readonly seen = new Map<string, Line>();
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly file: string) {}

  static async open(stateDir: string, now = Date.now()): Promise<WebhookIds> {
    const ids = new WebhookIds(join(stateDir, FILE));
    for (const value of await readJsonLines(ids.file)) {
      const parsed = line.safeParse(value);
      if (!parsed.success || now - parsed.data.at >= SEEN_FOR_MS) continue;
      const key = keyOf(parsed.data);
      const known = ids.seen.get(key);
      // A later line of the same id adds the run a queued fire became, or replaces a skipped take.
      ids.remember(key, known && !known.skipped ? { ...known, run: parsed.data.run ?? known.run } : parsed.data);
    }
    await writeFileDurably(ids.file, toJsonLines([...ids.seen.values()]));
    return ids;
  }

  /** What `id`, signed with `secret`, did within the last 24 hours, if anything. */
  get(secret: string, id: string, now = Date.now()): Seen | undefined {
    const seen = this.seen.get(keyOf({ secret: hashOf(secret), id }));
    if (!seen || now - seen.at >= SEEN_FOR_MS) return undefined;
    return { job: seen.job, at: seen.at, ...(seen.run !== undefined ? { run: seen.run } : {}), ...(seen.skipped ? { skipped: true } : {}) };
  }

  /**
   * Takes `id` at once (a second request with it, arriving while this one is written, finds it) and
   * resolves once it is on disk.
   */
  add(secret: string, id: string, seen: Seen): Promise<void> {
    const record: Line = { secret: hashOf(secret), id, ...seen };
    this.remember(keyOf(record), record);
    return this.append(record);
  }

  /** The run a queued fire became. */
  started(secret: string, id: string, run: string): Promise<void> {
    const seen = this.seen.get(keyOf({ secret: hashOf(secret), id }));
    if (!seen) return Promise.resolve();
    seen.run = run;
    return this.append({ secret: seen.secret, job: seen.job, id, at: seen.at, run });
  }

  private remember(key: string, seen: Line): void {
    this.seen.delete(key);
    this.seen.set(key, seen);
    if (this.seen.size > MAX_KEPT) this.seen.delete(this.seen.keys().next().value!);
  }

  private append(record: Line): Promise<void> {
    const done = this.writing.then(() => appendJsonLines(this.file, [record], { sync: "always" }));
    this.writing = done.catch(() => undefined);
    return done;
  }
}

/** A secret as the file keeps it: never the secret itself. A NUL cannot be in a header value. */
const hashOf = (secret: string) => createHash("sha256").update(secret).digest("hex").slice(0, 32);
const keyOf = (line: { secret: string; id: string }) => `${line.secret}\u0000${line.id}`;
