import * as z from "zod";
import { byteSize, describeKind, describeValue, duration, expected, oneOf, text, timeZone } from "../config/fields.js";
import { PRESET_NAMES } from "../providers/presets.js";
import { deliveryTargetsSchema } from "../delivery/targets.js";
import { budgetCaps } from "../cost/caps.js";
import { pathProblem } from "./json-path.js";
import { AT_FORM, cronLengthProblem, dateExists } from "./schedule.js";
import type { DeliverWhen, Job, OverlapPolicy, WatchEvent } from "./types.js";
import type { BreakerLimits } from "../agent/breaker.js";
import { verifyKeys } from "./verify-schema.js";
import { approveSchema } from "../approvals/rules.js";
import type { RunStatus } from "../store/run-record.js";

/**
 * Job names end up in session ids (`cron:<job>:<run>`) and file names, so they stay plain, and
 * short enough that those file names stay within the 255 bytes file systems allow.
 */
export const JOB_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export const WATCH_EVENTS = ["add", "change", "unlink"] as const satisfies readonly WatchEvent[];
export const OVERLAP_POLICIES = ["skip", "queue", "replace", "allow"] as const satisfies readonly OverlapPolicy[];
export const DELIVER_WHEN = ["always", "non_empty", "changed"] as const satisfies readonly DeliverWhen[];

const AT_EXAMPLE = '"2026-12-01T09:00:00+08:00" (without an offset: in the job\'s timezone)';

const atForm = () => expected(`a date and time like ${AT_EXAMPLE}`);

const listOf = <T extends z.ZodType>(item: T, what: string) =>
  z.array(item, expected(`a list of ${what}`)).min(1, expected(`a non-empty list of ${what}`));

/*
 * Plain booleans and numbers, unlike countd.yaml's (which take the strings ${VAR} yields): job
 * files are not interpolated, and without a preprocess step the JSON Schema keeps the defaults.
 */
const flag = () => z.boolean(expected("true or false"));

const positiveInt = () => {
  const message = expected("a positive integer");
  return z.number(message).int(message).positive(message);
};

const temperature = () => {
  const message = expected("a number from 0 to 2");
  return z.number(message).min(0, message).max(2, message);
};

const watchSchema = z
  .strictObject(
    {
      paths: listOf(text(), "paths or globs").describe(
        'Files to watch: paths or globs like "inbox/**/*.csv", relative to the workspace unless absolute. The folder before the first glob part must exist.',
      ),
      events: listOf(oneOf(WATCH_EVENTS), "events")
        .default(["add", "change"])
        .describe("Which file events start a run: add, change, unlink."),
      debounce: duration({ allowZero: true })
        .prefault("2s")
        .describe("Events within this window after the first become one run that lists every changed file."),
    },
    expected("a mapping with paths:, events: and debounce:"),
  )
  .describe("Run when files change; alone or beside a schedule.");

/** Far above any real event; a bigger body would only be held in memory while it is checked. */
export const MAX_WEBHOOK_BODY = 64 * 1024 * 1024;

const webhookSchema = z
  .strictObject(
    {
      secret: text().describe(
        "The Standard Webhooks signing secret (whsec_…) the sender signs with, as a ${VAR} reference listed in job_env and secrets (countd.yaml): secrets do not belong in job files.",
      ),
      max_body: byteSize()
        .refine((size) => size <= MAX_WEBHOOK_BODY, { error: `expected a size of at most ${MAX_WEBHOOK_BODY / 1024 / 1024}MB` })
        .prefault("1MB")
        .describe("The largest request body taken; a bigger one is refused (413)."),
      rate: positiveInt().default(60).describe("Requests a minute this job's hook takes; past it, 429 with Retry-After."),
    },
    expected("a mapping with secret: and optionally max_body:, rate:"),
  )
  .describe("Run when a signed POST arrives at the console's /hooks/<job>; alone or beside a schedule or watch.");

/**
 * The statuses a run ends with that can fire an `after:` job. Not running, nor skipped (the fire
 * never ran), nor interrupted: that run ended with its daemon, which fired nothing, and is only
 * found so at the next start, its answer lost.
 */
export const AFTER_STATUSES = ["ok", "error", "timeout", "cancelled", "budget"] as const satisfies readonly RunStatus[];

const afterSchema = z
  .strictObject(
    {
      job: z
        .string(expected("a job name"))
        .regex(JOB_NAME, { error: (issue) => `expected a job name, got ${describeValue(issue.input)}` })
        .describe("The job whose runs this one follows: it fires when a run of that job ends with one of `status`."),
      status: listOf(oneOf(AFTER_STATUSES), "statuses")
        .default(["ok"])
        .describe("The ends of the upstream run that fire this job: ok, error, timeout, cancelled, budget."),
    },
    expected("a mapping with job: and optionally status:"),
  )
  .describe("Run when a run of another job ends (after its retries), with {{upstream.answer}} and {{upstream.output.…}} in the prompt.");

const retrySchema = z
  .strictObject(
    {
      attempts: positiveInt().default(1).describe("Runs in all, the first included: 1 means no retry."),
      backoff: duration({ allowZero: true }).prefault("1m").describe("Wait before each retry."),
    },
    expected("a mapping with attempts: and backoff:"),
  )
  .prefault({})
  .describe("Run again after a failed or timed-out run.");

const outputSchema = z
  .strictObject(
    {
      schema: z
        .union([text(), z.record(z.string(), z.unknown())], expected("a JSON Schema (a mapping) or the path of a JSON file holding one"))
        .describe(
          "The JSON Schema the answer must satisfy, written here, or the path of a JSON file holding it (relative to the job file).",
        ),
      repair: z
        .number(expected("a whole number from 0 to 3"))
        .int(expected("a whole number from 0 to 3"))
        .min(0, expected("a whole number from 0 to 3"))
        .max(3, expected("a whole number from 0 to 3"))
        .default(1)
        .describe(
          "Requests that show an invalid answer its validation errors and ask again; still invalid, the run ends with status error.",
        ),
    },
    expected("a mapping with schema: and optionally repair:"),
  )
  .describe(
    "Typed output: the answer must be one JSON value valid against schema; it is delivered as JSON and journalled as the run's output.",
  );

const usd = (what: string) => {
  const message = expected("an amount in USD, a number of at least 0");
  return z.number(message).nonnegative(message).optional().describe(what);
};

const budgetSchema = z
  .strictObject(
    {
      per_run: usd("USD one run may spend: no LLM call starts once the run has spent this."),
      per_day: usd("USD the job's runs may spend in a day (budget.timezone's day in countd.yaml): no call starts once they have."),
      tokens_per_run: positiveInt().optional().describe("Tokens (input and output) one run may use; counts unpriced models too."),
      tokens_per_day: positiveInt().optional().describe("Tokens the job's runs may use in a day."),
    },
    expected("a mapping with per_run:, per_day:, tokens_per_run: or tokens_per_day:"),
  )
  .describe("Caps on what the job spends; a run that reaches one ends with status budget, and on_failure is told.");

const breakerSchema = z
  .union(
    [
      flag(),
      z.strictObject(
        {
          same_call: positiveInt()
            .optional()
            .describe("The run ends when it would make the same tool call with the same arguments this many times; that call is not made."),
          errors_in_a_row: positiveInt().optional().describe("The run ends after this many tool errors in a row."),
          idle_iterations: positiveInt()
            .optional()
            .describe(
              "The run ends after this many LLM iterations in a row whose tool calls brought no result not seen before in the run.",
            ),
        },
        expected("a mapping with same_call:, errors_in_a_row: or idle_iterations:"),
      ),
    ],
    expected("true, false or a mapping with same_call:, errors_in_a_row:, idle_iterations:"),
  )
  .transform((b): false | Partial<BreakerLimits> =>
    typeof b === "boolean"
      ? b && {}
      : {
          ...(b.same_call !== undefined ? { sameCall: b.same_call } : {}),
          ...(b.errors_in_a_row !== undefined ? { errorsInARow: b.errors_in_a_row } : {}),
          ...(b.idle_iterations !== undefined ? { idleIterations: b.idle_iterations } : {}),
        },
  )
  .describe(
    "Ends a run that repeats itself with status error (runaway: …): false turns it off; unset limits are countd.yaml's agent.breaker (3, 5, 8).",
  );

/** A job file as written (snake_case), with defaults applied and durations in milliseconds. */
export const jobFileSchema = z
  .strictObject(
    {
      name: z
        .string(expected("a job name"))
        .regex(JOB_NAME, {
          error: (issue) =>
            `expected a job name of at most 64 lowercase letters, digits, ".", "_" and "-" (starting with a letter or digit), got ${describeValue(issue.input)}`,
        })
        .optional()
        .describe("Unique job name; defaults to the file name without .yaml. Lowercase letters, digits, '.', '_' and '-'."),
      description: text().optional().describe("What the job is for; shown by `countd jobs` and available as {{job.description}}."),
      enabled: flag().default(true).describe("false keeps the job loaded but never fires it."),
      // Parsed and checked by the loader once the timezone is known (cronProblem).
      schedule: text()
        .superRefine((expression, ctx) => {
          const problem = cronLengthProblem(expression);
          if (problem) ctx.addIssue({ code: "custom", message: problem });
        })
        .optional()
        .describe('Cron expression with 5 fields, or 6 with seconds first, e.g. "0 9 * * 1-5". Not with every: or at:.'),
      every: duration({ allowZero: false })
        .refine((ms) => ms >= 1000, { error: "expected an interval of at least 1s" })
        .optional()
        .describe('Run at a fixed interval, e.g. "30m". Not with schedule: or at:.'),
      at: z
        .string(atForm())
        .regex(AT_FORM, { ...atForm(), abort: true })
        .refine(dateExists, { error: (issue) => `no such date and time: ${describeValue(issue.input)}` })
        .optional()
        .describe(
          "Run once at this date and time, e.g. 2026-12-01T09:00:00+08:00; without an offset, in the job's timezone. Not with schedule: or every:.",
        ),
      timezone: timeZone().optional().describe("IANA time zone for the schedule and the prompt's {{date}}; defaults to countd.yaml's."),
      watch: watchSchema.optional(),
      webhook: webhookSchema.optional(),
      after: afterSchema.optional(),
      prompt: z
        .string({
          error: (issue) =>
            issue.input === undefined
              ? "required: the message the agent is given on each run"
              : `expected a string, got ${describeValue(issue.input)}`,
        })
        .min(1, expected("a non-empty string"))
        .describe(
          "The message given to the agent on each run. Placeholders: {{date}}, {{time}}, {{datetime}}, {{job.name}}, {{job.description}}, {{run.id}}, {{files}}, {{payload}} (a webhook's body, framed as untrusted data); with after:, {{upstream.answer}}, {{upstream.output.<path>}}, {{upstream.run_id}}, {{upstream.job}}, {{upstream.status}}.",
        ),
      session: oneOf(["isolated", "shared"] as const)
        .default("isolated")
        .describe("isolated: a fresh conversation per run; shared: one conversation kept across runs."),
      provider: oneOf(PRESET_NAMES).optional().describe("Provider preset for this job instead of countd.yaml's."),
      model: text().optional().describe("Model for this job instead of countd.yaml's."),
      temperature: temperature().optional().describe("Sampling temperature for this job (0 to 2)."),
      max_tokens: positiveInt().optional().describe("Largest answer per LLM request for this job."),
      max_iterations: positiveInt().optional().describe("Most agent loop iterations for this job."),
      breaker: breakerSchema.optional(),
      tools: z
        .array(text(), expected("a list of tool names"))
        .optional()
        .describe("The only tools the job may use; without it, every enabled tool. [] means none."),
      budget: budgetSchema.optional(),
      timeout: duration({ allowZero: false }).prefault("10m").describe("A run still going after this is cancelled (status timeout)."),
      overlap: oneOf(OVERLAP_POLICIES)
        .default("skip")
        .describe("When a fire comes while the job runs: skip it, queue it, replace the running run, or allow both."),
      catch_up: duration({ allowZero: true })
        .prefault("1h")
        .describe("After downtime, one run if a slot was missed within this window; 0 = never."),
      retry: retrySchema,
      deliver: deliveryTargetsSchema.describe(
        "Where the answer goes: - email: {to: [...]} or - webhook: {url: ...}. Addresses, URLs, secrets and header values may hold ${VAR} references, filled in from the environment at send time.",
      ),
      deliver_when: oneOf(DELIVER_WHEN)
        .default("always")
        .describe(
          "always: every answer is delivered; non_empty: an empty answer, or one that is exactly NO_REPLY, is not; changed: an answer the same as the last one delivered is not.",
        ),
      changed_on: text()
        .superRefine((path, ctx) => {
          const problem = pathProblem(path);
          if (problem) ctx.addIssue({ code: "custom", message: problem });
        })
        .optional()
        .describe(
          'With deliver_when: changed, a JSONPath into the answer\'s JSON, e.g. "$.items[*].id": only the values it selects are compared, in any order.',
        ),
      output: outputSchema.optional(),
      on_failure: deliveryTargetsSchema.describe("Where a failed, timed-out or interrupted run is reported; same form as deliver."),
      on_failure_repeat: duration({ allowZero: false })
        .prefault("1h")
        .describe(
          'While the job keeps failing, at most one "still failing" report per this interval after the first failure\'s; the next success sends one "recovered".',
        ),
      ...verifyKeys,
      approve: approveSchema
        .optional()
        .describe(
          "Tool calls that wait for a person's yes before they run: rules:, ask:, timeout:, on_timeout:. Left out, countd.yaml's approve:.",
        ),
    },
    {
      // What the file holds is not quoted: it may be no job at all, but a secret a link led to.
      error: (issue) => `expected a job: a mapping with prompt:, schedule: …, got ${describeKind(issue.input)}`,
    },
  )
  .superRefine((f, ctx) => {
    if (f.changed_on !== undefined && f.deliver_when !== "changed")
      ctx.addIssue({
        code: "custom",
        path: ["changed_on"],
        message: `changed_on is used only with deliver_when: changed, got deliver_when: ${f.deliver_when}`,
      });
  })
  .meta({
    title: "countd job",
    description: "One job of the countd daemon (jobs/*.yaml): when it runs, the prompt it gives the agent, and where the answer goes.",
  });

/**
 * A job file read into a Job: the camelCase settings, and what load.ts completes from the file's
 * name and place and the context (the name, the timezone, the schedule, the watched paths).
 */
export const jobSchema = jobFileSchema.transform((f) => ({
  /** Undefined: the file name. */
  name: f.name,
  /** Undefined: countd.yaml's. */
  timezone: f.timezone,
  trigger: { schedule: f.schedule, every: f.every, at: f.at },
  /** `paths` as written: relative ones are taken from the workspace. */
  watch: f.watch && { paths: f.watch.paths, events: [...new Set(f.watch.events)], debounceMs: f.watch.debounce },
  webhook: f.webhook && { secret: f.webhook.secret, maxBody: f.webhook.max_body, rate: f.webhook.rate },
  after: f.after && { job: f.after.job, statuses: [...new Set(f.after.status)] },
  /** The schema as written: load.ts reads a file it names and compiles it (jobs/output-schema.ts). */
  output: f.output,
  settings: {
    description: f.description,
    enabled: f.enabled,
    prompt: f.prompt,
    session: f.session,
    overrides: {
      provider: f.provider,
      model: f.model,
      temperature: f.temperature,
      maxTokens: f.max_tokens,
      maxIterations: f.max_iterations,
      ...(f.breaker !== undefined ? { breaker: f.breaker } : {}),
    },
    tools: f.tools,
    timeoutMs: f.timeout,
    overlap: f.overlap,
    catchUpMs: f.catch_up,
    retry: { attempts: f.retry.attempts, backoffMs: f.retry.backoff },
    ...(f.budget ? { budget: budgetCaps(f.budget) } : {}),
    deliver: f.deliver,
    deliverWhen: f.deliver_when,
    ...(f.changed_on !== undefined ? { changedOn: f.changed_on } : {}),
    onFailure: f.on_failure,
    onFailureRepeatMs: f.on_failure_repeat,
    ...(f.verify ? { verify: { checks: f.verify, onFail: f.on_verify_fail } } : {}),
    ...(f.approve ? { approve: f.approve } : {}),
  } satisfies Omit<Job, "name" | "file" | "timezone" | "schedule" | "watch" | "webhook" | "after" | "output">,
}));

export type JobFile = z.output<typeof jobSchema>;

/** The text of schema/job.schema.json: what editors read, so it describes what users write. */
export function jobJsonSchema(): string {
  return `${JSON.stringify(z.toJSONSchema(jobFileSchema, { io: "input", target: "draft-07" }), null, 2)}\n`;
}
