import type { Redactor } from "../audit/redact.js";
import type { EventBus } from "../events.js";
import { addCost, addUsage, emptyUsage, type Usage } from "../providers/types.js";
import type { RunRecord } from "../store/run-record.js";
import { excerpt } from "../text.js";
import type { ActiveRun, LiveMessage, Subscription } from "./protocol.js";

/** A tool result on the wire is cut here: the whole result is in the transcript. */
export const LIVE_RESULT_CHARS = 16_000;
/** What one run keeps for clients that connect mid-run; past it, answer text and results are no longer kept (still sent live). */
export const REPLAY_BYTES_PER_RUN = 1_000_000;
/** A client this far behind is dropped: the daemon does not hold a slow reader's backlog. */
export const SLOW_CLIENT_BYTES = 4_000_000;
/**
 * Subscribe messages one client may send a second; past it the client is told why and dropped. The
 * page sends one per screen it opens; each is answered with a replay of the runs it names.
 */
export const SUBSCRIBES_PER_SECOND = 10;

/** The side of a WebSocket the hub needs; `ws`'s WebSocket fits it. */
export interface LiveSocket {
  readonly bufferedAmount: number;
  send(text: string): void;
  close(code: number, reason: string): void;
}

interface RunState {
  record: RunRecord;
  /** Where daemons share a backend: the node running it; `remote` when that is another daemon, whose messages come through Redis. */
  node?: string;
  remote: boolean;
  iteration: number;
  usage: Usage;
  cost: number | null;
  replay: Kept[];
  replayBytes: number;
  /** The answer's end not yet sent: it could be the start of a secret that the next chunk completes. */
  held: string;
}

/** A message kept for replay with its text, serialised once however many clients are sent it. */
interface Kept {
  message: LiveMessage;
  /** Unset while a stream message is still being joined to. */
  text?: string;
}

interface Client {
  socket: LiveSocket;
  filter: Omit<Subscription, "type">;
  /** When the current second of subscribes began, and how many came in it. */
  window: { since: number; count: number };
}

/**
 * The live stream: turns the event bus's events into the console's messages, keeps what each run
 * in progress has produced so far (for a client that connects mid-run), and sends each message to
 * the clients that asked for it. Runs are told apart by their session id, which the runner's
 * `run.started` names; events of sessions that are no run (subagents, `countd ask`) are not sent.
 * Where daemons share a backend the messages of this daemon's runs are tagged with its node and
 * handed to `tap` listeners (which publish them to the other daemons), and other nodes' messages come in through remote(), so
 * every node's clients see every node's runs.
 */
export class LiveHub {
  private readonly runs = new Map<string, RunState>();
  private readonly bySession = new Map<string, RunState>();
  private readonly clients = new Set<Client>();
  private readonly detach: Array<() => void> = [];
  private readonly taps = new Set<(message: LiveMessage) => void>();
  private readonly node: string | undefined;
  /** Whether a job's runs call a model with no price: they are unpriced from their start. */
  private readonly unpriced: (job: string) => boolean;

  constructor(
    events: EventBus,
    private readonly redactor: () => Redactor,
    opts: { node?: string; unpriced?: (job: string) => boolean } = {},
  ) {
    this.node = opts.node;
    this.unpriced = opts.unpriced ?? (() => false);
    this.detach.push(
      events.on("run.started", ({ run }) => this.started(run)),
      events.on("iteration", (e) =>
        this.forSession(e.sessionId, (state) => {
          state.iteration = e.iteration;
          return { type: "iteration", run_id: state.record.id, job: state.record.job, iteration: e.iteration };
        }),
      ),
      events.on("answer.chunk", (e) => {
        const state = this.bySession.get(e.sessionId);
        if (!state) return;
        const { ready, held } = this.redactor().redactStreamed(state.held + e.text);
        state.held = held;
        if (ready !== "") this.emit(state, { type: "stream", run_id: state.record.id, job: state.record.job, content: ready });
      }),
      events.on("tool.started", (e) =>
        this.forSession(e.sessionId, (state) => ({
          type: "tool_start",
          run_id: state.record.id,
          job: state.record.job,
          call_id: e.callId,
          name: e.name,
          arguments: e.arguments,
        })),
      ),
      events.on("tool.finished", (e) =>
        this.forSession(e.sessionId, (state) => ({
          type: "tool_result",
          run_id: state.record.id,
          job: state.record.job,
          call_id: e.callId,
          name: e.name,
          result: excerpt(e.result, LIVE_RESULT_CHARS, ` [cut: ${e.result.length} characters in all; the transcript has the whole result]`),
          duration_ms: Math.round(e.durationMs),
          attempts: e.attempts,
          ...(e.error !== undefined ? { error: excerpt(e.error, LIVE_RESULT_CHARS) } : {}),
        })),
      ),
      events.on("llm.finished", (e) =>
        this.forSession(e.sessionId, (state) => {
          addUsage(state.usage, e.usage);
          state.cost = addCost(state.cost, e.cost);
          return {
            type: "llm",
            run_id: state.record.id,
            job: state.record.job,
            model: e.model,
            usage: e.usage,
            cost: e.cost,
            duration_ms: Math.round(e.durationMs),
            ...(e.error ? { error: e.error } : {}),
          };
        }),
      ),
      events.on("run.finished", ({ run }) => this.finished(run)),
      // A run that waits for an answer is no longer in progress: it is told as ended, status waiting, and starts again once answered.
      events.on("run.waiting", ({ run }) => this.finished(run)),
      events.on("delivery", (e) => {
        const owner = /^(.+)\.(\d{8}T\d{6}Z-[0-9a-f]+)\./.exec(e.id);
        this.broadcast({
          type: "delivery",
          id: e.id,
          ...(owner ? { job: owner[1]!, run_id: owner[2]! } : {}),
          status: e.status,
          attempts: e.attempts,
          target: e.target,
          to: e.to,
          kind: e.kind,
          ...(e.error !== undefined ? { error: e.error } : {}),
          ...(e.nextAttemptAt !== undefined ? { next_attempt_at: e.nextAttemptAt } : {}),
        });
      }),
    );
  }

  /** Runs in progress with how far they got, every node's where daemons share a backend: for the status and the overview. */
  active(): ActiveRun[] {
    return [...this.runs.values()].map((state) => ({
      id: state.record.id,
      job: state.record.job,
      reason: state.record.reason,
      started_at: state.record.startedAt,
      iteration: state.iteration,
      usage: { ...state.usage },
      cost: state.cost,
      ...(state.node !== undefined ? { node: state.node } : {}),
    }));
  }

  isRunning(runId: string, job: string): boolean {
    return this.runs.get(key(job, runId)) !== undefined;
  }

  /** A new client: it receives `replay`, what the runs it asked for have produced so far, then `live`, then everything as it happens. */
  connect(
    socket: LiveSocket,
    filter: Omit<Subscription, "type"> = {},
  ): { subscribe(filter: Omit<Subscription, "type">): void; close(): void } {
    const client: Client = { socket, filter, window: { since: performance.now(), count: 0 } };
    this.clients.add(client);
    this.replay(client);
    return {
      subscribe: (next) => {
        // A client dropped for its rate may still have a burst on the wire: each is refused here at no cost.
        if (!this.clients.has(client) || !this.withinRate(client)) return;
        client.filter = { ...(next.run ? { run: next.run } : {}), ...(next.job ? { job: next.job } : {}) };
        this.replay(client);
      },
      close: () => this.clients.delete(client),
    };
  }

  /** Each message this daemon's own runs produce, redacted and tagged with its node, as it is sent. */
  tap(listener: (message: LiveMessage) => void): () => void {
    this.taps.add(listener);
    return () => this.taps.delete(listener);
  }

  /** What each of this daemon's runs in progress has produced so far, run_started first: for a node that joined late. */
  snapshot(): LiveMessage[][] {
    return [...this.runs.values()].filter((state) => !state.remote).map((state) => state.replay.map((kept) => kept.message));
  }

  /** The runs in progress on this daemon, as `job/id`. */
  localRuns(): string[] {
    return [...this.runs.entries()].filter(([, state]) => !state.remote).map(([id]) => id);
  }

  /**
   * A message of another node's run (already redacted there), sent on to the clients that asked
   * for it; its run's progress is kept as for a run here, for the status and for late clients.
   */
  remote(message: LiveMessage): void {
    if (message.node !== undefined && message.node === this.node) return;
    const safe = this.redactor().redactValue(message) as LiveMessage;
    if (safe.type === "live" || safe.type === "replay") return;
    if (safe.type === "delivery") return this.send(safe, JSON.stringify(safe));
    const id = key(safe.job, safe.run_id);
    if (safe.type === "run_started") {
      if (this.runs.has(id)) return;
      this.runs.set(id, { ...freshState(safe.run), node: safe.node, remote: true });
    }
    const state = this.runs.get(id);
    if (safe.type === "run_finished") this.runs.delete(id);
    else if (state && safe.type === "iteration") state.iteration = safe.iteration;
    else if (state && safe.type === "llm") {
      addUsage(state.usage, safe.usage);
      state.cost = addCost(state.cost, safe.cost);
    }
    const text = JSON.stringify(safe);
    if (state && safe.type !== "run_finished") this.keep(state, safe, text);
    this.send(safe, text);
  }

  /** A run another node had in progress before this one heard of it: its messages so far, unless it is known already. */
  remoteReplay(messages: readonly LiveMessage[]): void {
    const first = messages[0];
    if (first?.type !== "run_started" || this.runs.has(key(first.job, first.run_id))) return;
    for (const message of messages) this.remote(message);
  }

  /** Drops the runs of `node` not in `keep` (`job/id`): it ended them unheard, or stopped. Their clients hear nothing more of them. */
  forget(node: string, keep: ReadonlySet<string> = new Set()): void {
    for (const [id, state] of this.runs) if (state.remote && state.node === node && !keep.has(id)) this.runs.delete(id);
  }

  /** Drops these runs of other nodes (`job/id`); their clients hear nothing more of them. */
  drop(runs: readonly string[]): void {
    for (const id of runs) if (this.runs.get(id)?.remote) this.runs.delete(id);
  }

  clientCount(): number {
    return this.clients.size;
  }

  close(): void {
    this.detach.forEach((off) => off());
    for (const client of this.clients) client.socket.close(1001, "countd is stopping");
    this.clients.clear();
  }

  private started(run: RunRecord): void {
    const state: RunState = {
      ...freshState(run),
      ...(this.unpriced(run.job) ? { cost: null } : {}),
      ...(this.node !== undefined ? { node: this.node } : {}),
      remote: false,
    };
    this.runs.set(key(run.job, run.id), state);
    this.bySession.set(run.sessionId, state);
    // A run on a model with no price says so from its start: the pages begin its cost there.
    this.emit(state, { type: "run_started", run_id: run.id, job: run.job, run: state.cost === null ? { ...run, cost: null } : run });
  }

  private finished(run: RunRecord): void {
    const state = this.runs.get(key(run.job, run.id));
    if (state) this.release(state);
    this.runs.delete(key(run.job, run.id));
    if (state && this.bySession.get(run.sessionId) === state) this.bySession.delete(run.sessionId);
    this.broadcast({
      type: "run_finished",
      run_id: run.id,
      job: run.job,
      status: run.status,
      usage: run.usage,
      ...(run.cost !== undefined ? { cost: run.cost } : {}),
      ...(run.error ? { error: run.error } : {}),
      run,
    });
  }

  /** Any other event of a run ends the answer text before it: what was held back is sent first. */
  private forSession(sessionId: string, make: (state: RunState) => LiveMessage): void {
    const state = this.bySession.get(sessionId);
    if (!state) return;
    this.release(state);
    this.emit(state, make(state));
  }

  private release(state: RunState): void {
    if (state.held === "") return;
    const content = state.held;
    state.held = "";
    this.emit(state, { type: "stream", run_id: state.record.id, job: state.record.job, content });
  }

  private emit(state: RunState, message: LiveMessage): void {
    const safe = this.outgoing(message);
    const text = JSON.stringify(safe);
    this.keep(state, safe, text);
    this.send(safe, text);
    this.taps.forEach((listener) => listener(safe));
  }

  private keep(state: RunState, safe: LiveMessage, text: string): void {
    if (state.replayBytes + text.length <= REPLAY_BYTES_PER_RUN) {
      const last = state.replay.at(-1);
      // Chunks kept one by one would cost a message each on replay; joined, they read the same.
      if (safe.type === "stream" && last?.message.type === "stream") {
        last.message.content += safe.content;
        delete last.text;
      }
      // A copy: the message itself went to the clients and the other daemons, and later chunks are joined to what is kept.
      else if (safe.type === "stream") state.replay.push({ message: { ...safe } });
      else state.replay.push({ message: safe, text });
      state.replayBytes += text.length;
    }
  }

  private broadcast(message: LiveMessage): void {
    const safe = this.outgoing(message);
    this.send(safe, JSON.stringify(safe));
    this.taps.forEach((listener) => listener(safe));
  }

  /** A message of this daemon's, redacted, with its node where daemons share a backend. */
  private outgoing(message: LiveMessage): LiveMessage {
    return this.redactor().redactValue(this.node !== undefined ? { ...message, node: this.node } : message) as LiveMessage;
  }

  private send(message: LiveMessage, text: string): void {
    for (const client of this.clients) if (wants(client.filter, message)) this.deliver(client, text);
  }

  private replay(client: Client): void {
    this.deliver(client, JSON.stringify({ type: "replay" } satisfies LiveMessage));
    for (const state of this.runs.values()) {
      if (!wants(client.filter, { type: "run_started", run_id: state.record.id, job: state.record.job } as LiveMessage)) continue;
      for (const kept of state.replay) this.deliver(client, (kept.text ??= JSON.stringify(kept.message)));
    }
    this.deliver(client, JSON.stringify({ type: "live" } satisfies LiveMessage));
  }

  /** Counts a subscribe; past the rate the client is dropped, so a flood costs one replay a message at most ten times a second. */
  private withinRate(client: Client): boolean {
    const now = performance.now();
    if (now - client.window.since >= 1000) client.window = { since: now, count: 0 };
    if (++client.window.count <= SUBSCRIBES_PER_SECOND) return true;
    this.clients.delete(client);
    client.socket.close(1008, `too many subscribe messages: at most ${SUBSCRIBES_PER_SECOND} a second`);
    return false;
  }

  private deliver(client: Client, text: string): void {
    if (!this.clients.has(client)) return;
    if (client.socket.bufferedAmount > SLOW_CLIENT_BYTES) {
      this.clients.delete(client);
      client.socket.close(1013, "too slow: the messages waiting for this client passed the limit");
      return;
    }
    client.socket.send(text);
  }
}

const key = (job: string, id: string) => `${job}/${id}`;

function freshState(record: RunRecord): Omit<RunState, "remote"> {
  return { record, iteration: 0, usage: emptyUsage(), cost: 0, replay: [], replayBytes: 0, held: "" };
}

function wants(filter: Omit<Subscription, "type">, message: LiveMessage): boolean {
  if (message.type === "live" || message.type === "replay") return true;
  const job = "job" in message ? message.job : undefined;
  const run = "run_id" in message ? message.run_id : undefined;
  if (filter.run !== undefined && filter.run !== run) return false;
  if (filter.job !== undefined && filter.job !== job) return false;
  return true;
}
