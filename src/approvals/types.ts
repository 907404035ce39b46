import type { ChatMessage, ToolCall, Usage } from "../providers/types.js";
import type { ApprovalAnswer } from "./links.js";
import type { OnTimeout } from "./rules.js";

/**
 * One tool call waiting for a person's yes, and what became of it. Shown by `countd approvals`,
 * the console and the API; its wire names are snake_case there (see `approvalView`).
 */
export interface Approval {
  /** newApprovalId(): in links and in `countd approve <id>`. */
  id: string;
  job: string;
  /** The run that waits. */
  run: string;
  tool: string;
  /** The call's arguments, whole, as the agent gave them (redacted like everything countd shows). */
  arguments: unknown;
  /** callHash(tool, arguments): a link is bound to this call and no other. */
  hash: string;
  /** The rule that matched, as written in the job file or countd.yaml, and why it matched. */
  rule: string;
  /** ISO 8601. */
  askedAt: string;
  /** ISO 8601: the request's timeout; its links are refused from then on. */
  expiresAt: string;
  onTimeout: OnTimeout;
  /** The agent's reasoning so far, an excerpt: what the person reads before answering. */
  reasoning: string;
  /** `waiting` until answered; an answer is given once. */
  status: "waiting" | "approved" | "denied" | "expired";
  answer?: AnsweredBy & { answer: ApprovalAnswer | "timeout"; at: string };
  /** The node the run was suspended on, where daemons share a backend. */
  node?: string;
}

/** Who answered, and how: which link, which CLI user, which console session. */
export interface AnsweredBy {
  via: "link" | "cli" | "console" | "timeout";
  /** The link's answer page (`link`), the user's login name (`cli`), the console session (`console`), `countd` (`timeout`). */
  by: string;
  /** `countd approve --note`, `countd deny --reason`, or the text typed on the page. */
  note?: string;
}

/**
 * Where a message of the agent loop stopped for an approval: everything it needs to go on, so it
 * goes on in another process (after a restart, on another node) as if it had never stopped.
 */
export interface SuspendedMessage {
  /** The user message the loop was given (the rendered prompt). */
  message: string;
  /** The answer text the message had given before it stopped: the run's answer begins with it. */
  said: string;
  /** The conversation as sent to the model, up to and including the assistant message with the pending call. */
  messages: ChatMessage[];
  /** What the message adds to the session once it ends: written whole at the end, so a waiting run leaves no half turn there. */
  transcript: ChatMessage[];
  /** The calls of the last assistant message not yet answered: the first is the one that waits. */
  pending: ToolCall[];
  /** Why the first pending call waits: the rule of approve: it matched, as the gate said. */
  rule: string;
  iterations: number;
  toolCalls: number;
  usage: Usage;
  /** USD; null when a call had no price. */
  cost: number | null;
  /** The calls that ran, as the loop reports them. */
  calls: Array<{ name: string; arguments: unknown; isError: boolean; result: string }>;
  /** The time the run was active before it stopped: its timeout counts only active time. */
  activeMs: number;
}

/** A waiting run as kept until it is resumed: the fire that started it and where its loop stopped. */
export interface SuspendedRun {
  job: string;
  run: string;
  /** ISO 8601: the run's first start; the resumed run keeps it. */
  startedAt: string;
  reason: string;
  /** ISO 8601. */
  scheduledAt: string;
  /** ISO 8601: the instant the prompt's placeholders read. */
  clockAt: string;
  files?: string[];
  loop: SuspendedMessage;
}

export type AnswerResult = { ok: true; approval: Approval } | { ok: false; why: "unknown" | "answered" | "expired"; approval?: Approval };

/**
 * Where approvals and the runs waiting on them are kept: the state directory's files for a daemon
 * alone, the shared backend's where daemons share one, so any node resumes a run.
 */
export interface ApprovalStore {
  /** Every approval kept, newest first: the waiting ones and those answered within the retention. */
  list(): Promise<Approval[]>;
  get(id: string): Promise<Approval | undefined>;
  /** Keeps a new request and its run, synced, before anyone is asked. */
  add(approval: Approval, run: SuspendedRun): Promise<void>;
  /**
   * Gives the answer once: the first answer of a waiting approval is kept (synced) and returned;
   * any later one, on any node, gets `answered`.
   */
  answer(id: string, answer: ApprovalAnswer | "timeout", by: AnsweredBy, at: Date): Promise<AnswerResult>;
  /** The run an approval suspended, until it has been resumed. */
  suspended(id: string): Promise<SuspendedRun | undefined>;
  /** The run went on: its suspension is dropped, the approval stays listed. Returns false when another node took it first. */
  resumed(id: string): Promise<boolean>;
}

/** What a link's page may do: the answer its token carries, or why it is refused. */
export type LinkCheck =
  | { ok: true; approval: Approval; answer: ApprovalAnswer }
  | { ok: false; why: "unknown" | "answered" | "expired" | "forged" | "other call" | "malformed"; approval?: Approval };

/** An approval as the API, `countd approvals --json` and the console show it: snake_case, the key and hash of its call included. */
export interface ApprovalView {
  id: string;
  job: string;
  run: string;
  tool: string;
  arguments: unknown;
  hash: string;
  rule: string;
  asked_at: string;
  expires_at: string;
  on_timeout: OnTimeout;
  reasoning: string;
  status: Approval["status"];
  answer?: { answer: ApprovalAnswer | "timeout"; via: AnsweredBy["via"]; by: string; at: string; note?: string };
  node?: string;
}

export function approvalView(approval: Approval): ApprovalView {
  const { askedAt, expiresAt, onTimeout, answer, ...rest } = approval;
  return {
    ...rest,
    asked_at: askedAt,
    expires_at: expiresAt,
    on_timeout: onTimeout,
    ...(answer
      ? { answer: { answer: answer.answer, via: answer.via, by: answer.by, at: answer.at, ...(answer.note ? { note: answer.note } : {}) } }
      : {}),
  };
}
