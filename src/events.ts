import { EventEmitter } from "node:events";
import type { FinishReason, Usage } from "./providers/types.js";
import type { Approval } from "./approvals/types.js";
import type { RunRecord } from "./store/run-record.js";

/** Why the heartbeat did not ask the agent: one per rule of decideHeartbeat, so a metric's labels stay few. */
export type HeartbeatSkip = "outside_active_hours" | "daily_cap" | "recent_contact" | "nothing_to_do";

/**
 * What happens inside a run, as it happens, and to runs and deliveries: the CLI prints from it,
 * the web console streams it. The loop does not wait for listeners.
 */
export interface CountdEvents {
  iteration: { sessionId: string; iteration: number };
  "answer.chunk": { sessionId: string; text: string };
  /** `server`: the MCP server a tool comes from. */
  "tool.started": { sessionId: string; callId: string; name: string; arguments: unknown; server?: string };
  "tool.finished": {
    sessionId: string;
    callId: string;
    name: string;
    server?: string;
    arguments: unknown;
    result: string;
    durationMs: number;
    attempts: number;
    error?: string;
  };
  "llm.finished": {
    sessionId: string;
    model: string;
    usage: Usage;
    /** USD; null when the model has no price. */
    cost: number | null;
    durationMs: number;
    finishReason: FinishReason | "error" | "cancelled";
    attempts: number;
    error?: string;
  };
  /** A file tool wrote this file (an absolute real path). */
  "file.written": { sessionId: string; path: string };
  /** Something went wrong that did not stop the run, such as a failed history summary. */
  warning: { sessionId: string; message: string };
  "message.finished": {
    sessionId: string;
    status: "ok" | "limit" | "cancelled" | "error" | "budget" | "waiting";
    iterations: number;
    toolCalls: number;
    usage: Usage;
    /** USD of this message's calls; null when one of them has no price. */
    cost: number | null;
    durationMs: number;
    error?: string;
  };
  /** A run began: its record, running (a copy). */
  "run.started": { run: RunRecord };
  /**
   * A run's final record (a copy), for every attempt that ran, and for a fire recorded without
   * running (skipped, cancelled while it waited). For an attempt that ran: `willRetry`, true when
   * another attempt follows (so this one is not the fire's last word), and its whole answer and
   * typed output, redacted, which the record only has cut to an excerpt.
   */
  "run.finished": { run: RunRecord; willRetry?: boolean; outcome?: { answer: string; output?: unknown } };
  /** A run stopped at a tool call that waits for a person's yes (src/approvals/): its slot is free, it goes on once answered. */
  "run.waiting": { run: RunRecord; approval: Approval };
  /**
   * An approval was answered on this daemon (src/approvals/desk.ts): by a link, the CLI, the
   * console, or its timeout (`expired`). Given once, on the node that took the answer.
   */
  "approval.answered": {
    job: string;
    run: string;
    approval: string;
    answer: "approved" | "denied" | "expired";
    via: "link" | "cli" | "console" | "timeout";
  };
  /** One of a job's `verify:` checks ran on a run's answer (src/runner/verify.ts). */
  "verify.checked": { job: string; runId: string; check: "command" | "expect" | "tools_called"; passed: boolean };
  /** A delivery changed, once the outbox has recorded it. */
  delivery: {
    id: string;
    status: "queued" | "held" | "released" | "sending" | "delivered" | "failed" | "dead" | "retried" | "purged";
    attempts: number;
    /** The target's key (delivery/targets.ts targetKey). */
    target: string;
    /** Who receives it, without secrets (delivery/targets.ts describeTarget). */
    to: string;
    kind: "email" | "webhook";
    error?: string;
    /** For "failed" and "retried": when it is attempted next. */
    nextAttemptAt?: string;
  };
  /**
   * A heartbeat tick's end: skipped without the LLM, silent (the agent had nothing to say),
   * duplicate (the same message was delivered within a day), failed (the run or its delivery),
   * or sent.
   */
  "heartbeat.decision": { outcome: "skipped"; reason: HeartbeatSkip } | { outcome: "silent" | "duplicate" | "failed" | "sent" };
}

export type EventName = keyof CountdEvents;

/**
 * Each listener is called on its own: one that throws neither reaches the emitter (a run, the
 * runner, the outbox) nor keeps the listeners after it from hearing the event; it is reported to
 * `onListenerError` (the daemon logs it; by default a process warning).
 */
export class EventBus {
  private readonly emitter = new EventEmitter();

  constructor(private readonly onListenerError: (event: EventName, error: unknown) => void = warn) {}

  emit<K extends EventName>(name: K, payload: CountdEvents[K]): void {
    this.emitter.emit(name, payload);
  }

  /** Returns a function that removes the listener. */
  on<K extends EventName>(name: K, listener: (payload: CountdEvents[K]) => void): () => void {
    const guarded = (payload: CountdEvents[K]) => {
      try {
        listener(payload);
      } catch (err) {
        this.onListenerError(name, err);
      }
    };
    this.emitter.on(name, guarded);
    return () => this.emitter.off(name, guarded);
  }
}

function warn(event: EventName, error: unknown): void {
  process.emitWarning(`a listener of "${event}" failed: ${error instanceof Error ? error.message : String(error)}`);
}
