import * as z from "zod";
import { count, isoTime } from "./quarantine.js";

/*
 * What a run's journal holds, one JSON line per entry, in the order things happened. Every entry
 * carries `v` (the format's version) and `kind`; an entry of a subagent carries `sub`, the
 * subagent's id, and lies among its parent's entries as it happened. Long texts that repeat from
 * run to run (the system prompt, the rendered prompt) are kept once per content in a blob named
 * by its SHA-256 and referenced by that hash. docs/operations.md describes the format.
 */

/** The journal format's version, written in every entry; a reader refuses entries of a later one. */
export const JOURNAL_VERSION = 1;

const usage = z.object({ inputTokens: count, outputTokens: count, cachedInputTokens: count, cacheWriteTokens: count });
const sha256 = z.string().regex(/^[0-9a-f]{64}$/, "expected a SHA-256 in hex");
const base = { v: z.literal(JOURNAL_VERSION), at: isoTime, sub: z.string().optional() };

const fire = z.object({
  ...base,
  kind: z.literal("fire"),
  job: z.string(),
  run: z.string(),
  reason: z.string(),
  scheduled_at: isoTime,
  session: z.string(),
  node: z.string().optional(),
  files: z.array(z.string()).optional(),
  payload: z.string().optional(),
  /** An `after:` fire's upstream run, its answer whole and its output (the typed output, else the answer parsed as JSON). */
  upstream: z
    .object({ job: z.string(), run: z.string(), status: z.string(), answer: z.string(), output: z.unknown().optional() })
    .optional(),
});

/** A subagent began its task; its entries follow, marked with its id. */
const subagent = z.object({ ...base, kind: z.literal("subagent"), sub: z.string(), task: z.string() });

const prompt = z.object({ ...base, kind: z.literal("prompt"), system: sha256.optional(), user: sha256 });

const llm = z.object({
  ...base,
  kind: z.literal("llm"),
  request: z.object({
    model: z.string(),
    temperature: z.number(),
    max_tokens: count,
    tools: z.array(z.string()),
    messages: count,
    /** `summary`: the call that condensed the history past agent.max_history into MEMORY.md before the run's first. */
    purpose: z.literal("summary").optional(),
  }),
  response: z.object({
    text: z.string(),
    tool_calls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.unknown() })),
    reasoning: z.string().optional(),
    finish_reason: z.string(),
    usage,
    cost: z.number().nullable(),
    attempts: count,
    duration_ms: z.number().nonnegative(),
    error: z.string().optional(),
  }),
});

const tool = z.object({
  ...base,
  kind: z.literal("tool"),
  call_id: z.string(),
  name: z.string(),
  server: z.string().optional(),
  arguments: z.unknown(),
  /** The result as the model read it, whole: bounded only by the tool's own output cap, which says so in it. */
  result: z.string(),
  is_error: z.boolean(),
  /** 0: not run (a limit, a cancel, a runaway stop); the result says why. */
  attempts: count,
  duration_ms: z.number().nonnegative(),
});

/** Text the loop itself added to the answer (the limit notice). */
const note = z.object({ ...base, kind: z.literal("note"), text: z.string() });

/** Typed output: the answer was not valid against the job's output.schema, and the model was asked again with these errors. */
const repair = z.object({ ...base, kind: z.literal("repair"), errors: z.array(z.string()) });

/**
 * The deliveries queued at the run's end; `messages`: what each carries, as stored (absent in
 * journals written before replays), and each id's target (absent in journals written before
 * replays compared templates).
 */
const delivery = z.object({
  ...base,
  kind: z.literal("delivery"),
  ids: z.array(z.string()),
  messages: z.array(z.object({ ids: z.array(z.string()), message: z.unknown(), targets: z.array(z.unknown()).optional() })).optional(),
});

/** One of the job's `verify:` checks, run on the answer before any delivery (each attempt's, with `retry`). */
const verify = z.object({
  ...base,
  kind: z.literal("verify"),
  index: count,
  check: z.enum(["command", "expect", "tools_called"]),
  what: z.string(),
  passed: z.boolean(),
  reason: z.string().optional(),
});

/**
 * A tool call waited for a person's yes: `asked` when the run stopped (who was asked, until when),
 * then the answer once given, by whom and how, before the run goes on.
 */
const approval = z.object({
  ...base,
  kind: z.literal("approval"),
  id: z.string(),
  event: z.enum(["asked", "approved", "denied", "expired"]),
  tool: z.string(),
  rule: z.string().optional(),
  expires_at: z.string().optional(),
  via: z.enum(["link", "cli", "console", "timeout"]).optional(),
  by: z.string().optional(),
  note: z.string().optional(),
});

const end = z.object({
  ...base,
  kind: z.literal("end"),
  status: z.string(),
  error: z.string().optional(),
  /** The run's answer as delivered (a check-in's message; empty when it failed); absent in journals written before replays. */
  answer: z.string().optional(),
  /** Why the answer of an ok run was not delivered (deliver_when: changed: "unchanged since run <id>"). */
  not_delivered: z.string().optional(),
  iterations: count,
  tool_calls: count,
  usage,
  cost: z.number().nullable().optional(),
  /** Typed output: the answer's value, valid against the job's output.schema; absent for a job without one or a run that failed. */
  output: z.unknown().optional(),
});

export const journalEntry = z.discriminatedUnion("kind", [
  fire,
  subagent,
  prompt,
  llm,
  tool,
  note,
  repair,
  delivery,
  verify,
  approval,
  end,
]);

export type JournalEntry = z.infer<typeof journalEntry>;
/** An entry as a writer hands it over: the version, time and subagent mark are added by the journal. */
export type JournalInput = JournalEntry extends infer E ? (E extends JournalEntry ? Omit<E, "v" | "at" | "sub"> : never) : never;

/**
 * What records a run into its journal: the loop, the tools (a subagent's steps) and the pipeline
 * each get one. Writing never throws and never waits: entries are written in order behind the
 * run, and a write that fails is logged, never the run's failure.
 */
export interface JournalWriter {
  write(entry: JournalInput): void;
  /** Keeps a long text once per content; returns its hash, for an entry to reference. */
  blob(text: string): string;
  /** The writer of a subagent's steps, marked with its id, into the same journal. */
  nested(sub: string): JournalWriter;
}
