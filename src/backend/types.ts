import type { Redactor } from "../audit/redact.js";
import type { LiveHub } from "../console/live.js";
import type { DeliveryOutbox, SendFn } from "../delivery/delivery-outbox.js";
import type { OwnDeliveries } from "../delivery/own-deliveries.js";
import type { EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import type { Runner } from "../runner/runner.js";
import type { FireRequest } from "../runner/types.js";
import type { SessionHistory, SessionStore } from "../sessions/store.js";
import type { CancelResult, RunRecord } from "../store/run-record.js";
import type { SpendBook, SpendLedger, SpendLine } from "../store/spend-ledger.js";
import type { DisabledTarget, OutboxEntry } from "../store/outbox-store.js";
import type { StateStore } from "../store/state.js";
import type { TranscriptStore } from "../store/transcripts.js";
import type { ApprovalStore } from "../approvals/types.js";

export interface OutboxListing {
  entries: OutboxEntry[];
  disabledTargets: Record<string, DisabledTarget>;
}

/** How the budgets' day is counted and how long a day's calls are kept, read at each call (a reload changes them). */
export interface SpendCounting {
  timeZone: () => string;
  keptMs: () => number;
}

/**
 * Where countd keeps what lasts: the state directory's files for a daemon alone, or a store that
 * several daemons share. openBackend (open.ts) chooses it once, from countd.yaml; every command
 * and the daemon use what it gives, so no other code asks which one it is.
 */
export interface Backend {
  /** The name each run's record carries when several daemons share the backend; undefined alone. */
  readonly node?: string;
  /** Whether daemons on other machines share the outbox: a command changes it beside them, not through this machine's daemon. */
  readonly sharedOutbox: boolean;
  /** What a command says of a change it made while no daemon runs here: where it is kept until one does. */
  readonly keptOffline: string;
  /** Job state, pauses and the run history. */
  openState(): Promise<StateStore>;
  /** Where runs keep their conversations, given this machine's session files. */
  sessions(local: SessionStore): SessionHistory;
  /** What the daily budgets count, given this process's own ledger. */
  spend(local: SpendLedger, counting: SpendCounting): SpendBook;
  /** The LLM calls made since `since`, for `countd cost`. */
  spendSince(since: Date): Promise<SpendLine[]>;
  /** The outbox runs queue to, sending with `send` what `own` says this machine may send. */
  outbox(send: SendFn, own: OwnDeliveries, events?: EventBus): Promise<DeliveryOutbox>;
  /** The outbox's deliveries and disabled targets, read without taking it from the daemon that sends them. */
  readOutbox(): Promise<OutboxListing>;
  /** Where a command reads runs' transcripts: this machine's journals, and other nodes' where daemons share a backend. */
  transcripts(): TranscriptStore;
  /** The approvals and the runs waiting on them, and the key their links are signed with: the same on every node. */
  approvals(): Promise<{ store: ApprovalStore; key: Buffer }>;
  /** A run that waited for an answer goes on here: its journal so far is brought to this machine's state directory first, if it is elsewhere. */
  continueJournal(job: string, runId: string): Promise<void>;
  /** A `countd ask` was answered at `at`: the heartbeat's idle threshold counts from it. */
  recordExchange(at: Date): Promise<void>;
  close(): Promise<void>;
}

/** What the daemon reads of the runs in progress everywhere: the transcripts, and a cancel that reaches the run's daemon. */
export interface RunsView {
  transcripts: TranscriptStore;
  cancel(run: RunRecord, why: string): Promise<CancelResult>;
}

/** What a daemon needs beside the stores: where scheduled fires go and who runs them. */
export interface DaemonBackend extends Backend {
  /**
   * Where a slot's or a catch-up's fire goes, so a slot runs once: `here` (this daemon runs it), or
   * the shared queue, whose daemon that takes it runs it.
   */
  scheduled(here: (request: FireRequest) => void): (request: FireRequest) => void;
  /** The view of every daemon's runs, opened before serve() so a run taken at once is seen. */
  view(opts: {
    live: LiveHub;
    runner: Runner;
    events: EventBus;
    /** The state directory as configured now, where this daemon's journals are. */
    state: () => string;
    keepMs: () => number;
    redactor: () => Redactor;
  }): Promise<RunsView>;
  /** Starts running the fires other daemons added; `interrupted` reports a run a killed daemon left that is not run again. */
  serve(opts: {
    runner: Runner;
    job: (name: string) => Job | undefined;
    concurrency: number;
    interrupted: (job: Job, run: RunRecord) => Promise<void>;
    /** Asked before a scheduled fire taken from another daemon runs: the fire to run, or undefined when its rules say not now. */
    admit: (request: FireRequest) => Promise<FireRequest | undefined>;
  }): void;
  /** The jobs armed here, whose catch_up windows decide how long shared fires are kept. */
  retain(jobs: readonly Job[]): void;
  /** Stops taking fires while `shutdown` (the runner's) ends the runs in progress. */
  stop(shutdown: () => Promise<void>): Promise<void>;
}
