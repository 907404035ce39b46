import type { Usage } from "../providers/types.js";
import type { RunReason, RunRecord, RunStatus } from "../store/run-record.js";

export type { Usage, RunReason, RunRecord, RunStatus };

/**
 * What the console's API and WebSocket hand to their clients (the page, `countd` commands talking
 * to the daemon, scripts): the one place their shapes are written down. Field names are
 * snake_case on the wire, as the original design's `{"type": "stream", "content": chunk}` is.
 */

/**
 * One message on `/api/ws`, in the order things happened. Where daemons share a backend each
 * message but `live` names the `node` whose daemon it comes from: every node's runs are on
 * every node's stream.
 */
export type LiveMessage = LiveEvent & { node?: string };

type LiveEvent =
  | { type: "run_started"; run_id: string; job: string; run: RunRecord }
  | { type: "iteration"; run_id: string; job: string; iteration: number }
  | { type: "stream"; run_id: string; job: string; content: string }
  | { type: "tool_start"; run_id: string; job: string; call_id: string; name: string; arguments: unknown }
  | {
      type: "tool_result";
      run_id: string;
      job: string;
      call_id: string;
      name: string;
      result: string;
      duration_ms: number;
      attempts: number;
      error?: string;
    }
  /** `cost`: USD, null when the model has no price. */
  | { type: "llm"; run_id: string; job: string; model: string; usage: Usage; cost: number | null; duration_ms: number; error?: string }
  /**
   * `cost` as the run's record has it: absent when the run made no priced call through a runtime (a skipped fire).
   * Status `waiting`: the run stopped at a tool call until someone answers; a `run_started` follows when it goes on.
   */
  | {
      type: "run_finished";
      run_id: string;
      job: string;
      status: RunStatus;
      usage: Usage;
      cost?: number | null;
      error?: string;
      run: RunRecord;
    }
  | {
      type: "delivery";
      id: string;
      job?: string;
      run_id?: string;
      status: string;
      attempts: number;
      /** The target's key. */
      target: string;
      /** Who receives it, without secrets: "email to ops@example.com", "json webhook at https://…". */
      to: string;
      kind: string;
      error?: string;
      next_attempt_at?: string;
    }
  /**
   * Sent first in answer to a connection or a (re)subscription: what came before it was chosen by
   * the earlier subscription, what follows up to `live` is the replay of the runs in progress.
   */
  | { type: "replay" }
  /** Sent once after a (re)subscription's replay: what follows is live. */
  | { type: "live" };

/** What a client may send on `/api/ws` to narrow what it receives; `{}` is everything. */
export interface Subscription {
  type: "subscribe";
  run?: string;
  job?: string;
}

export type { Transcript, TranscriptStep, RunDelivery } from "../store/transcript-types.js";
import type { Transcript, RunDelivery } from "../store/transcript-types.js";

/** What every refusal and failure answers, with its HTTP status (400, 401, 403, 404, 409, 500, 503). */
export interface ErrorAnswer {
  error: string;
}

/** GET /api/session: the session's CSRF proof every change from the page carries ("" with a bearer token), and the daemon's version. */
export interface SessionView {
  csrf: string;
  version: string;
}

/** POST /api/sign-out: whether a session ended; the answer's Set-Cookie clears the cookie. */
export interface SignOutAnswer {
  signed_out: boolean;
}

/** GET /api/jobs: every job file, those that loaded no job too, by name. */
export interface JobsView {
  jobs: JobView[];
}

/** GET /api/jobs/<name>: a loaded job with its settings, or a file that loaded no job (no settings). */
export type JobAnswer = JobDetail | JobView;

/** GET /api/runs: a page of runs, newest first; `next` is the `before` of the next page, absent on the last. */
export interface RunsPage {
  runs: RunRecord[];
  next?: string;
}

export interface RunView {
  run: RunRecord;
  /** The job's zone, which the run's times are shown in. */
  timezone: string;
  transcript: Transcript;
  deliveries: RunDelivery[];
  /** Set while the run is in progress: its live messages so far are on the WebSocket. */
  running: boolean;
}

export interface JobView {
  name: string;
  file: string;
  description?: string;
  enabled: boolean;
  /** "cron 0 9 * * *", "every 1h", "at …", "watch inbox/*.csv, /srv/drop/*.txt", "webhook", joined by " + "; "manual" with neither. */
  trigger: string;
  timezone: string;
  /** ISO 8601 UTC, as every time on the wire; shown in `timezone`. */
  next_fires: string[];
  last_run?: Pick<RunRecord, "id" | "status" | "reason" | "startedAt" | "finishedAt" | "error">;
  paused: boolean;
  paused_at?: string;
  /** Problems of its file now (the job keeps its last good version), or of a file that loaded no job. */
  problems: string[];
  /** False for a file that is invalid and loaded no job: it has no runs, no fires and cannot be run. */
  loaded: boolean;
  /** Why no job is loaded from the file: its first problem without its place, when `loaded` is false. */
  not_loaded?: string;
}

export interface JobDetail extends JobView {
  settings: {
    prompt: string;
    session: "isolated" | "shared";
    overlap: string;
    timeout_ms: number;
    catch_up_ms: number;
    retry: { attempts: number; backoff_ms: number };
    tools?: string[];
    deliver: string[];
    on_failure: string[];
    deliver_when: string;
    watch?: { paths: string[] };
    /** Where it is fired, and its limits; never its secret. */
    webhook?: { path: string; max_body: number; rate: number };
  };
}

export interface ActiveRun {
  id: string;
  job: string;
  reason: RunReason;
  started_at: string;
  iteration: number;
  /** The run's own calls so far (its subagents' are added when it ends). */
  usage: Usage;
  /** USD so far; null once a call's model has no price. */
  cost: number | null;
  /** Where daemons share a backend: the node running it. */
  node?: string;
}

export interface StatusView {
  up: true;
  pid: number;
  version: string;
  started_at: string;
  /** countd.yaml's: the zone times tied to no job (the daemon's start) are shown in. */
  timezone: string;
  uptime_s: number;
  jobs: {
    loaded: number;
    invalid: number;
    paused: number;
    paused_all: boolean;
    /** Each job whose file has problems: `loaded` false when the daemon fires nothing from it. */
    invalid_jobs: Array<{ name: string; file: string; loaded: boolean; problems: string[] }>;
  };
  running: ActiveRun[];
  /** Runs waiting for a person's answer to a tool call, oldest request first (`countd approvals` answers them). */
  waiting: WaitingRun[];
  queued: number;
  outbox: { pending: number; dead: number };
  next_fires: Array<{ job: string; at: string }>;
  today: {
    runs: number;
    failures: number;
    tokens: Usage;
    by_status: Partial<Record<RunStatus, number>>;
    /** USD of today's runs, those in progress so far; a run whose model has no price adds nothing here and counts in `unpriced`. */
    cost: number;
    /** Runs whose cost is not known: a call's model has no price. */
    unpriced: number;
    /** The same for each job that ran today. */
    by_job: Record<string, Spend>;
  };
  /**
   * What the daily budgets count: every LLM call today in `timezone` (budget.timezone), priced
   * ones in `cost`, input and output tokens of all in `tokens`; countd.yaml's caps when set.
   */
  budget: { timezone: string; date: string; cost: number; tokens: number; per_day?: number; tokens_per_day?: number };
}

/** A run suspended on a tool call until someone answers its approval. */
export interface WaitingRun {
  job: string;
  run: string;
  /** The approval's id: `countd approve <id>`. */
  approval: string;
  tool: string;
  asked_at: string;
  expires_at: string;
}

/** What some runs spent: USD of the priced ones, how many were unpriced, and the tokens of all. */
export interface Spend {
  cost: number;
  unpriced: number;
  tokens: Usage;
}

/** A delivery in the outbox (GET /api/outbox): its run when it has one, and the zone its times are shown in (its job's). */
/** `held`: why a held delivery waits for its release (the failed checks of `on_verify_fail: hold`). */
export type OutboxItem = RunDelivery & { job?: string; run_id?: string; created_at: string; timezone: string; held?: string };

export interface OutboxView {
  pending: OutboxItem[];
  dead: OutboxItem[];
  /** Target keys an HTTP 410 disabled: nothing is sent to them until a retry. */
  disabled_targets: string[];
}

/** The answers to the other changes: a run's cancel, a delivery's retry (`retried` deliveries), the outbox's purge, a pause or resume. */
export type CancelAnswer = { run_id: string; job: string; status: "cancelling" };
export type RetryAnswer = { id: string; retried: number };
export type ReleaseAnswer = { id: string; released: true };
export type PurgeAnswer = { purged: number };
export type PauseAnswer = { job: string; paused: boolean } | { paused_all: boolean };

/** The answer to "run now": what became of the fire. */
export type RunNowAnswer =
  { status: "started"; run_id: string } | { status: "queued"; message: string } | { status: "skipped"; run_id: string; message: string };

/** What the charts draw (GET /api/stats): runs per day by status and their cost, and each recent run's duration, tokens and cost. */
export interface StatsView {
  /** The zone the days are counted in: the job's, or countd.yaml's for all jobs. */
  timezone: string;
  /** Oldest first, one per day (YYYY-MM-DD), days without runs included. */
  /** `cost`: USD of the day's priced runs; `unpriced`: its runs whose model has no price. */
  days: Array<{ date: string; by_status: Partial<Record<RunStatus, number>>; cost: number; unpriced: number }>;
  /**
   * Finished runs that started within the days, oldest first; only for one job (`?job=`), else
   * empty. `cost`: USD, null for an unpriced model, absent on runs recorded before pricing.
   */
  runs: Array<{
    id: string;
    job: string;
    started_at: string;
    status: RunStatus;
    duration_ms: number;
    tokens: number;
    cost?: number | null;
  }>;
}
