import { join } from "node:path";
import { z } from "zod";
import { writeFileDurably } from "./durable.js";
import { appendJsonLines, readJsonLines, toJsonLines } from "./jsonl.js";

/** How long a `webhook-id` is remembered: senders retry for about a day (Standard Webhooks' schedule ends within it). */
export const SEEN_FOR_MS = 24 * 3_600_000;
/**
 * Ids kept at most, over all jobs; past it the oldest are forgotten first. Far above what the
 * per-job rate lets in over a day for a few jobs, and small enough (some 10 MB) to hold in memory.
 */
const MAX_KEPT = 100_000;

const FILE = "webhook-ids.jsonl";

const line = z.object({ job: z.string(), id: z.string(), at: z.number(), run: z.string().optional() });
type Line = z.infer<typeof line>;

export interface Seen {
  /** Epoch milliseconds the id was first taken. */
  at: number;
  /** The run the id fired; undefined while that fire waits in the queue. */
  run?: string;
}

/**
 * The `webhook-id`s that fired a job in the last 24 hours, so that a sender's retry never runs a
 * job twice, also across a restart. An append-only JSON Lines file (one line when an id fires, one
 * more when its queued run gets an id), synced before the answer goes out, rewritten without the
 * expired lines when the daemon opens it: state.json is rewritten whole at every change, which
 * would cost a write of every id per request.
 */
export class WebhookIds {
  private readonly seen = new Map<string, Seen>();
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly file: string) {}

  static async open(stateDir: string, now = Date.now()): Promise<WebhookIds> {
    const ids = new WebhookIds(join(stateDir, FILE));
    for (const value of await readJsonLines(ids.file)) {
      const parsed = line.safeParse(value);
      if (!parsed.success || now - parsed.data.at >= SEEN_FOR_MS) continue;
      const { job, id, at, run } = parsed.data;
      const key = keyOf(job, id);
      const known = ids.seen.get(key);
      ids.remember(key, { at: known?.at ?? at, ...((run ?? known?.run) !== undefined ? { run: run ?? known?.run } : {}) });
    }
    await writeFileDurably(ids.file, toJsonLines([...ids.seen].map(([key, seen]) => ({ ...splitKey(key), ...seen }))));
    return ids;
  }

  /** What `id` fired for `job` within the last 24 hours, if it did. */
  get(job: string, id: string, now = Date.now()): Seen | undefined {
    const seen = this.seen.get(keyOf(job, id));
    return seen && now - seen.at < SEEN_FOR_MS ? seen : undefined;
  }

  /**
   * Takes `id` at once (a second request with it, arriving while this one is written, finds it) and
   * resolves once it is on disk.
   */
  add(job: string, id: string, seen: Seen): Promise<void> {
    this.remember(keyOf(job, id), seen);
    return this.append({ job, id, ...seen });
  }

  /** The run a queued fire became. */
  started(job: string, id: string, run: string): Promise<void> {
    const key = keyOf(job, id);
    const seen = this.seen.get(key);
    if (!seen) return Promise.resolve();
    seen.run = run;
    return this.append({ job, id, at: seen.at, run });
  }

  private remember(key: string, seen: Seen): void {
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

/** A NUL cannot be in a job name nor in a header value. */
const keyOf = (job: string, id: string) => `${job}\u0000${id}`;

function splitKey(key: string): { job: string; id: string } {
  const cut = key.indexOf("\u0000");
  return { job: key.slice(0, cut), id: key.slice(cut + 1) };
}
