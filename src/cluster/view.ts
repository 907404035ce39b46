import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import * as z from "zod";
import type { Redactor } from "../audit/redact.js";
import type { EventBus } from "../events.js";
import { silentLogger, type Logger } from "../log.js";
import type { Runner } from "../runner/runner.js";
import type { CancelResult, RunRecord } from "../store/run-record.js";
import { errorText } from "../text.js";
import { liveMessageShape } from "./live-shapes.js";
import { RemoteRuns } from "./remote-runs.js";
import type { RedisTranscripts } from "./transcripts.js";

/** The one pub/sub channel the nodes tell each other about their runs on. */
const CHANNEL = "countd:view";
/** How often a node says which runs it has in progress; a node not heard for SILENT_MS is taken as gone, its runs with it. */
export const ALIVE_MS = 5_000;
const SILENT_MS = 3 * ALIVE_MS;
/** How long a cancel waits for the node holding the run to answer. */
export const CANCEL_ANSWER_MS = 5_000;

/** A cancel's reason, as it goes into the run's record: a node says a short sentence. */
const WHY_CHARS = 500;
/** How often a message that cannot be used is logged, per kind: a flood of them is one line a minute. */
const DROPPED_LOG_MS = 60_000;

/** A live message as the cluster passes it on: the console's (console/protocol.ts), checked against liveMessageShape when it comes in. */
export type LiveLike = { type: string; node?: string };
const runShape = z.object({ job: z.string(), id: z.string() });

/**
 * What the nodes say to each other: each live message of their runs; every ALIVE_MS the runs they
 * have in progress; `hello` (to all, or `to` one node) asks for the messages so far of every run in
 * progress, which a `sync` for each run answers (one message per run keeps each within what Redis
 * buffers for a subscriber); `stopped` as a daemon stops; `cancel` asks a node to cancel a run
 * it holds, and `cancelled` answers whether it was there to cancel.
 */
const envelopeShape = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("live"), node: z.string(), message: liveMessageShape }),
  z.object({ kind: z.literal("alive"), node: z.string(), runs: z.array(runShape) }),
  z.object({ kind: z.literal("hello"), node: z.string(), to: z.string().optional() }),
  z.object({ kind: z.literal("sync"), node: z.string(), to: z.string(), run: z.array(liveMessageShape) }),
  z.object({ kind: z.literal("stopped"), node: z.string() }),
  z.object({
    kind: z.literal("cancel"),
    node: z.string(),
    to: z.string(),
    request: z.string(),
    run: z.string(),
    why: z.string().max(WHY_CHARS),
  }),
  z.object({
    kind: z.literal("cancelled"),
    node: z.string(),
    to: z.string(),
    request: z.string(),
    result: z.enum(["cancelled", "not found"]),
  }),
]);
type Envelope = z.infer<typeof envelopeShape>;
/** What this node says: its own live messages go out as its hub made them. */
type Outgoing =
  | Exclude<Envelope, { kind: "live" | "sync" }>
  | { kind: "live"; node: string; message: LiveLike }
  | { kind: "sync"; node: string; to: string; run: LiveLike[] };

/** The live hub's side the cluster feeds and reads (console/live.ts's LiveHub). */
export interface LiveFeed<M extends LiveLike> {
  tap(listener: (message: M) => void): () => void;
  remote(message: M): void;
  remoteReplay(messages: readonly M[]): void;
  snapshot(): M[][];
  localRuns(): string[];
  isRunning(runId: string, job: string): boolean;
  forget(node: string, keep?: ReadonlySet<string>): void;
  /** Drops these runs (`job/id`) of other nodes from view. */
  drop(runs: readonly string[]): void;
}

export interface ClusterViewOptions<M extends LiveLike> {
  node: string;
  /** The `records` connection: a message sent while Redis is away is dropped at once, never queued behind the outage. */
  publisher: Redis;
  /** A connection of its own, given over to the subscription. */
  subscriber: Redis;
  live: LiveFeed<M>;
  runner: Pick<Runner, "cancel">;
  events: EventBus;
  transcripts: RedisTranscripts;
  /** retention.sessions and the redactor as configured now (a reload changes them). */
  keepMs: () => number;
  redactor: () => Redactor;
  log?: Logger;
}

/**
 * One view of the cluster's runs from any node: this node's live messages go to every other node's
 * live hub (tagged with its node), theirs come to this one's; a run another node holds is cancelled
 * through it; each run that ends here has its journal stored in Redis for the others' `countd show`.
 * Pub/sub keeps nothing: a node that was away asks the others (hello) for what their runs in
 * progress produced so far, as a console client connecting mid-run gets it.
 */
export class ClusterView<M extends LiveLike> {
  private readonly log: Logger;
  private readonly heard = new Map<string, number>();
  private readonly answers = new Map<string, (result: "cancelled" | "not found") => void>();
  private readonly saving = new Set<Promise<void>>();
  private readonly detach: Array<() => void> = [];
  private readonly timer: NodeJS.Timeout;
  private readonly remote = new RemoteRuns();
  /** When a message of each kind that could not be used was last logged, and how many were dropped since. */
  private readonly dropped = new Map<string, { at: number; count: number }>();

  private constructor(private readonly opts: ClusterViewOptions<M>) {
    this.log = (opts.log ?? silentLogger).child({ component: "cluster-view" });
    const { live, events, subscriber } = opts;
    this.detach.push(
      live.tap((message) => this.publish({ kind: "live", node: opts.node, message })),
      events.on("run.finished", ({ run }) => this.store(run)),
      // A waiting run may go on on another node, which takes its journal so far from Redis.
      events.on("run.waiting", ({ run }) => this.store(run)),
    );
    subscriber.on("message", (channel: string, text: string) => {
      if (channel === CHANNEL) this.receive(text);
    });
    // Back after an outage (ioredis subscribes again by itself): what the others did meanwhile is asked for.
    subscriber.on("ready", () => this.publish({ kind: "hello", node: opts.node }));
    this.timer = setInterval(() => this.tick(), ALIVE_MS).unref();
  }

  /** Where the console and `countd show` read transcripts on this node: every node's runs. */
  get transcripts(): RedisTranscripts {
    return this.opts.transcripts;
  }

  static async open<M extends LiveLike>(opts: ClusterViewOptions<M>): Promise<ClusterView<M>> {
    await opts.subscriber.subscribe(CHANNEL);
    const view = new ClusterView(opts);
    view.publish({ kind: "hello", node: opts.node });
    return view;
  }

  /**
   * Cancels a run in progress (or a retry waiting out its backoff) on the node that holds it: at
   * once when that is this node, else by asking it. Its record says `why`, as a cancel on its node would.
   */
  async cancel(run: Pick<RunRecord, "id" | "job" | "node">, why: string): Promise<CancelResult> {
    if (run.node === undefined || run.node === this.opts.node) return this.opts.runner.cancel(run.id, why);
    const request = randomUUID();
    let timer: NodeJS.Timeout | undefined;
    const answered = new Promise<CancelResult>((resolve) => {
      this.answers.set(request, resolve);
      timer = setTimeout(() => resolve("no answer"), CANCEL_ANSWER_MS);
    });
    this.publish({ kind: "cancel", node: this.opts.node, to: run.node, request, run: run.id, why });
    const result = await answered;
    clearTimeout(timer);
    this.answers.delete(request);
    if (result === "no answer")
      this.log.warn({ job: run.job, runId: run.id, node: run.node }, "the node holding the run did not answer the cancel");
    return result;
  }

  /** Says this node is gone, waits for the journals being stored, and unsubscribes. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.detach.forEach((off) => off());
    await Promise.all(this.saving);
    this.publish({ kind: "stopped", node: this.opts.node });
    const { subscriber } = this.opts;
    if (subscriber.status === "ready") await subscriber.quit().catch(() => subscriber.disconnect());
    else subscriber.disconnect();
  }

  /**
   * A run of this node ended: its journal, whole by now (the runner saves the final record after
   * the journal's end is written), is stored for the other nodes. A fire that never started has none.
   */
  private store(run: RunRecord): void {
    if (run.status === "skipped") return;
    const saved = this.opts.transcripts.save(run, this.opts.keepMs(), this.opts.redactor()).finally(() => this.saving.delete(saved));
    this.saving.add(saved);
  }

  private tick(): void {
    const runs = this.opts.live.localRuns().map((id) => ({ job: id.slice(0, id.indexOf("/")), id: id.slice(id.indexOf("/") + 1) }));
    this.publish({ kind: "alive", node: this.opts.node, runs });
    const silentSince = Date.now() - SILENT_MS;
    for (const [node, at] of this.heard) {
      if (at >= silentSince) continue;
      this.log.warn({ node }, "a node has not been heard from; its runs in progress are no longer shown");
      this.heard.delete(node);
      this.forget(node);
    }
  }

  private receive(text: string): void {
    const envelope = this.parse(text);
    if (!envelope) return;
    const me = this.opts.node;
    if (envelope.node === me) return;
    this.heard.set(envelope.node, Date.now());
    const { live } = this.opts;
    switch (envelope.kind) {
      case "live":
        return this.remoteRun(envelope.node, [envelope.message], (messages) => live.remote(messages[0]!));
      case "alive": {
        const keep = new Set(envelope.runs.map((run) => `${run.job}/${run.id}`));
        this.remote.keepOnly(envelope.node, keep);
        live.forget(envelope.node, keep);
        // A run started while this node was not listening: its messages so far are asked for.
        if (envelope.runs.some((run) => !live.isRunning(run.id, run.job))) this.publish({ kind: "hello", node: me, to: envelope.node });
        return;
      }
      case "hello":
        if (envelope.to === undefined || envelope.to === me)
          for (const run of live.snapshot()) this.publish({ kind: "sync", node: me, to: envelope.node, run });
        return;
      case "sync":
        if (envelope.to === me) this.remoteRun(envelope.node, envelope.run, (messages) => live.remoteReplay(messages));
        return;
      case "stopped":
        this.heard.delete(envelope.node);
        return this.forget(envelope.node);
      case "cancel":
        if (envelope.to !== me) return;
        this.log.info({ runId: envelope.run, from: envelope.node }, "cancel asked by another node");
        return this.publish({
          kind: "cancelled",
          node: me,
          to: envelope.node,
          request: envelope.request,
          result: this.opts.runner.cancel(envelope.run, envelope.why),
        });
      case "cancelled":
        if (envelope.to === me) this.answers.get(envelope.request)?.(envelope.result);
        return;
    }
  }

  /** The envelope, or undefined for one that does not fit (dropped, and logged once per kind a minute). */
  private parse(text: string): Envelope | undefined {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = undefined;
    }
    const parsed = envelopeShape.safeParse(value);
    if (parsed.success) return parsed.data;
    const { kind, message } = (value ?? {}) as { kind?: unknown; message?: { type?: unknown } };
    const what = [kind, message?.type].filter((part) => typeof part === "string").join(" ") || "unreadable";
    const now = Date.now();
    const last = this.dropped.get(what);
    if (last && now - last.at < DROPPED_LOG_MS) {
      last.count += 1;
      return undefined;
    }
    this.dropped.set(what, { at: now, count: 0 });
    const problem = parsed.error.issues
      .slice(0, 3)
      .map((issue) => `${issue.path.join(".")}: ${issue.message}`)
      .join("; ");
    this.log.warn(
      { kind: what, problem, droppedSinceLastLine: last?.count ?? 0 },
      "a message on the cluster's channel does not fit; dropped (logged once a minute per kind)",
    );
    return undefined;
  }

  /**
   * Passes another node's messages of one run to the live hub, tagged with the node that sent
   * them, keeping at most RUNS_PER_NODE of its runs in progress (the oldest dropped from view).
   */
  private remoteRun(node: string, messages: Array<z.infer<typeof liveMessageShape>>, pass: (messages: M[]) => void): void {
    const tagged = messages.map((message) => ({ ...message, node }) as unknown as M);
    const first = messages[0];
    if (first?.type === "run_finished") this.remote.finished(node, `${first.job}/${first.run_id}`);
    if (first?.type !== "run_started") return pass(tagged);
    const dropped = this.remote.started(node, `${first.job}/${first.run_id}`);
    if (!dropped) {
      this.log.debug({ node, job: first.job, runId: first.run_id }, "too many nodes heard from; a run of one more is not shown");
      return;
    }
    pass(tagged);
    // Only the runs dropped to make room: a sweep of every run at each start cost a thousand runs starting at once ~50 ms a node.
    if (dropped.length > 0) this.opts.live.drop(dropped);
  }

  private forget(node: string): void {
    this.remote.keepOnly(node);
    this.opts.live.forget(node);
  }

  /** Sent while Redis is there; a message lost to an outage is made good by the next `alive` and `hello`. */
  private publish(envelope: Outgoing): void {
    this.opts.publisher.publish(CHANNEL, JSON.stringify(envelope)).catch((err: unknown) => {
      this.log.debug({ kind: envelope.kind, error: errorText(err) }, "could not publish on the cluster's channel");
    });
  }
}
