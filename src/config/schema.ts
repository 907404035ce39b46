import { hostname } from "node:os";
import * as z from "zod";
import { DEFAULT_BREAKER, type BreakerSettings } from "../agent/breaker.js";
import { DEFAULT_PERSONA, PERSONALITY_PRESETS, type Locale, type PersonaConfig } from "../agent/personalities.js";
import { deliveryTargetsSchema } from "../delivery/targets.js";
import { PRESET_NAMES } from "../providers/presets.js";
import { mcpServersSchema } from "../tools/mcp/config.js";
import { budgetCaps, type DaemonBudget } from "../cost/caps.js";
import type { Price } from "../cost/prices.js";
import { approveSchema } from "../approvals/rules.js";
import {
  bool,
  byteSize,
  duration,
  envName,
  expected,
  httpURL,
  list,
  numeric,
  oneOf,
  positiveInt,
  regex,
  section,
  text,
  timeZone,
  unlessEmpty,
} from "./fields.js";

const systemTimeZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

const LOCALES = ["zh", "en"] as const satisfies readonly Locale[];
export const SANDBOX_MODES = ["auto", "bwrap", "none"] as const;
const PERSONALITIES = [...PERSONALITY_PRESETS, "custom"] as const;

/** A host and port to listen on, as the console's address (also from COUNTD_CONSOLE_LISTEN). */
export const listenSchema = z
  .string(expected('a host and port like "127.0.0.1:7420"'))
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:\[\]]+):\d{1,5}$/, expected('a host and port like "127.0.0.1:7420" or "[::1]:7420"'))
  .refine((v) => Number(v.slice(v.lastIndexOf(":") + 1)) <= 65535, expected("a port from 0 to 65535"))
  .transform(listenAddress);

const usd = () =>
  numeric(z.number(expected("an amount in USD, a number of at least 0")).nonnegative(expected("an amount in USD, a number of at least 0")));

/** A price per million tokens; what the cache reads and writes cost defaults to the input price. */
const priceSchema = z
  .strictObject(
    {
      input: usd(),
      cached_input: usd().optional(),
      cache_write: usd().optional(),
      output: usd(),
    },
    expected("a mapping with input: and output: (USD per million tokens), and optionally cached_input:, cache_write:"),
  )
  .transform((p): Price => ({
    input: p.input,
    cachedInput: p.cached_input ?? p.input,
    cacheWrite: p.cache_write ?? p.input,
    output: p.output,
  }));

/** Caps a job or the heartbeat may set (USD and tokens), shared by countd.yaml's heartbeat and job files. */
export const budgetCapsShape = {
  per_run: usd().optional(),
  per_day: usd().optional(),
  tokens_per_run: positiveInt().optional(),
  tokens_per_day: positiveInt().optional(),
};

/**
 * countd.yaml as written (snake_case), read into the camelCase value the daemon uses, with
 * defaults applied, durations in milliseconds and sizes in bytes. What depends on where the file
 * is and on the environment (paths, the provider's endpoint and key, secret values) is left to
 * load.ts.
 */
export const configSchema = section({
  provider: section({
    preset: oneOf(PRESET_NAMES).default("openai"),
    base_url: unlessEmpty(httpURL),
    api_key: unlessEmpty(z.string(expected("a string"))),
    model: unlessEmpty(text()),
    temperature: numeric(
      z.number(expected("a number from 0 to 2")).min(0, expected("a number from 0 to 2")).max(2, expected("a number from 0 to 2")),
    ).default(0.7),
    max_tokens: positiveInt().default(4096),
    attempts: positiveInt().default(3),
    timeout: duration({ allowZero: false }).prefault("10m"),
  }).transform((p) => ({
    preset: p.preset,
    /** Undefined only for anthropic without an override: the SDK's default then applies. */
    baseURL: p.base_url,
    apiKey: p.api_key,
    model: p.model,
    temperature: p.temperature,
    maxTokens: p.max_tokens,
    /** Requests per LLM call, the first included. */
    attempts: p.attempts,
    /** Per LLM request. */
    timeoutMs: p.timeout,
  })),
  agent: section({
    max_iterations: positiveInt().default(25),
    max_retries: positiveInt().default(3),
    retry_delay: duration({ allowZero: true }).prefault("1s"),
    max_history: positiveInt().default(100),
    breaker: z
      .preprocess(
        (v) => (v === "false" ? false : v),
        z.union(
          [
            z.literal(false),
            section({
              same_call: positiveInt().default(DEFAULT_BREAKER.sameCall),
              errors_in_a_row: positiveInt().default(DEFAULT_BREAKER.errorsInARow),
              idle_iterations: positiveInt().default(DEFAULT_BREAKER.idleIterations),
            }),
          ],
          expected("false or a mapping with same_call:, errors_in_a_row:, idle_iterations:"),
        ),
      )
      .transform(
        (b): BreakerSettings => b && { sameCall: b.same_call, errorsInARow: b.errors_in_a_row, idleIterations: b.idle_iterations },
      ),
  }).transform((a) => ({
    maxIterations: a.max_iterations,
    /** Attempts per tool call. */
    maxRetries: a.max_retries,
    retryDelayMs: a.retry_delay,
    maxHistory: a.max_history,
    /** Per message, subagents' included; a job's `breaker:` is laid over it. */
    breaker: a.breaker,
  })),
  persona: section({
    name: text().default(DEFAULT_PERSONA.name),
    user_name: unlessEmpty(text()),
    personality: oneOf(PERSONALITIES).default(DEFAULT_PERSONA.personality),
    custom_personality: unlessEmpty(text()),
    locale: oneOf(LOCALES).default(DEFAULT_PERSONA.locale),
  })
    .refine((persona) => persona.personality !== "custom" || persona.custom_personality !== undefined, {
      path: ["personality"],
      message: '"custom" needs persona.custom_personality (the personality text)',
    })
    .transform((p): PersonaConfig => ({
      name: p.name,
      userName: p.user_name,
      personality: p.personality,
      customPersonality: p.custom_personality,
      locale: p.locale,
    })),
  /** IANA name. */
  timezone: timeZone().default(systemTimeZone),
  workspace: text().default("./workspace"),
  state_dir: text().default("./state"),
  logs_dir: text().default("./logs"),
  jobs_dir: text().default("./jobs"),
  /** Undefined: mail is written as .eml files under the state directory instead of sent. */
  smtp: z.preprocess(
    (v) => (v === null ? undefined : v),
    z
      .strictObject(
        {
          host: text(),
          port: numeric(
            z
              .number(expected("a port number"))
              .int(expected("a port number"))
              .min(1, expected("a port number"))
              .max(65535, expected("a port number")),
          ).default(587),
          /** TLS from the start (port 465); otherwise STARTTLS when the server offers it. */
          secure: bool().default(false),
          user: unlessEmpty(text()),
          password: unlessEmpty(text()),
          from: text(),
        },
        expected("a mapping"),
      )
      .optional(),
  ),
  /** Bytes a mail may attach: per file and in all. */
  attachments: section({
    max_file_size: byteSize().prefault("10MB"),
    max_message_size: byteSize().prefault("25MB"),
  }).transform((a) => ({ maxFileBytes: a.max_file_size, maxMessageBytes: a.max_message_size })),
  runner: section({
    concurrency: positiveInt().default(2),
    shutdown_grace: duration({ allowZero: true }).prefault("30s"),
  }).transform((r) => ({ concurrency: r.concurrency, shutdownGraceMs: r.shutdown_grace })),
  /** How long files are kept after their last write; pruned by the daemon (store/retention.ts). */
  retention: section({
    sessions: duration({ allowZero: false }).prefault("30d"),
    tool_history: duration({ allowZero: false }).prefault("30d"),
    audit: duration({ allowZero: false }).prefault("30d"),
  }).transform((r) => ({ sessionsMs: r.sessions, toolHistoryMs: r.tool_history, auditMs: r.audit })),
  heartbeat: section({
    enabled: bool().default(false),
    every: duration({ allowZero: false }).prefault("30m"),
    active_hours: z
      .string(expected('a time range like "08:00-21:00"'))
      .regex(/^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/, expected('a time range like "08:00-21:00"'))
      .default("08:00-21:00")
      .transform(timeRange),
    timezone: unlessEmpty(timeZone()),
    idle_threshold: duration({ allowZero: true }).prefault("4h"),
    max_per_day: positiveInt().default(2),
    checklist: text().default("HEARTBEAT.md"),
    deliver: deliveryTargetsSchema,
    provider: oneOf(PRESET_NAMES).optional(),
    model: unlessEmpty(text()),
    budget: section(budgetCapsShape).transform(budgetCaps),
  }).transform((h) => ({
    enabled: h.enabled,
    everyMs: h.every,
    /** Minutes after midnight in `timezone`; end before start means the range wraps past midnight. */
    activeHours: h.active_hours,
    /** Undefined in the file: countd.yaml's timezone. */
    timezone: h.timezone,
    idleThresholdMs: h.idle_threshold,
    maxPerDay: h.max_per_day,
    /** As written; load.ts resolves it in the workspace. */
    checklist: h.checklist,
    /** Where check-ins go; never empty when enabled. `${VAR}` references stay unresolved (see delivery/secrets.ts). */
    deliver: h.deliver,
    /** A cheaper provider or model for check-ins than the jobs'; undefined: provider's. */
    provider: h.provider,
    model: h.model,
    budget: h.budget,
  })),
  /** USD per million tokens by model name, before the bundled price table (cost/prices.ts). */
  prices: z.preprocess((v) => v ?? {}, z.record(text(), priceSchema, expected("a mapping of model names to prices"))),
  /** Caps over all runs together; `timezone`: whose day every daily cap counts (undefined: countd.yaml's timezone). */
  budget: section({
    per_day: usd().optional(),
    tokens_per_day: positiveInt().optional(),
    timezone: unlessEmpty(timeZone()),
  }).transform((b) => ({
    ...(b.per_day !== undefined ? { perDay: b.per_day } : {}),
    ...(b.tokens_per_day !== undefined ? { tokensPerDay: b.tokens_per_day } : {}),
    timezone: b.timezone,
  })),
  /** The web console and its API, served by the daemon (src/console/). */
  console: section({
    enabled: bool().default(true),
    listen: listenSchema.prefault("127.0.0.1:7420"),
    allow_remote: bool().default(false),
    metrics_public: bool().default(false),
  })
    // A listen value that failed its own check has been reported already.
    .refine((c) => typeof c.listen !== "object" || c.allow_remote || isLoopback(c.listen.host), {
      path: ["listen"],
      message:
        "is not a loopback address; the console serves the daemon's controls, so set console.allow_remote: true to listen beyond this machine (behind a TLS reverse proxy)",
    })
    .transform((c) => ({ enabled: c.enabled, listen: c.listen, allowRemote: c.allow_remote, metricsPublic: c.metrics_public })),
  /** Several daemons sharing one schedule on Redis (src/cluster/); undefined: this daemon alone, its state on disk. */
  cluster: z.preprocess(
    (v) => (v === null ? undefined : v),
    z
      .strictObject(
        {
          /** May hold a password: load.ts makes it a secret. */
          redis: z.url({ protocol: /^rediss?$/, ...expected('a Redis URL like "redis://127.0.0.1:6379/0" (or rediss:// for TLS)') }),
          /** Recorded with each run this daemon runs. */
          node: text()
            .max(253, expected("a node name of at most 253 characters"))
            .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, expected("a node name of letters, digits, . _ - (like a host name)"))
            .default(() => hostname()),
          /**
           * How long a daemon's hold on a fire or delivery it took lasts unless renewed: how soon
           * another daemon takes over what a killed one held. Renewed every half hold, so a hold
           * shorter than 2 s would be lost to an event loop busy for a second.
           */
          hold: duration({ allowZero: false })
            .refine((held) => held >= 2_000, {
              error: (issue) => `expected a hold of at least 2s, like "20s", got ${String(issue.input)} ms`,
            })
            .prefault("20s"),
        },
        expected("a mapping with redis: (and optionally node:, hold:)"),
      )
      .optional(),
  ),
  secrets: list(envName(), "environment variable names"),
  job_env: list(envName(), "environment variable names"),
  tools: section({
    restrict_to_workspace: bool().default(true),
    read_only_roots: list(text(), "folders"),
    writable_skills: bool().default(false),
    exec: section({
      enabled: bool().default(true),
      timeout: duration({ allowZero: false }).prefault("60s"),
      sandbox: oneOf(SANDBOX_MODES).default("auto"),
      network: bool().default(false),
      deny_patterns: list(regex(), "regular expressions"),
      allow_list: list(text(), "program names"),
      env: list(envName(), "environment variable names"),
    }).transform((e) => ({
      enabled: e.enabled,
      timeoutMs: e.timeout,
      sandbox: e.sandbox,
      network: e.network,
      denyPatterns: e.deny_patterns,
      allowList: e.allow_list,
      /** Environment variables passed to commands beside PATH, HOME, LANG, LC_ALL and TZ. */
      envNames: e.env,
    })),
    web: section({
      allow_hosts: list(text(), "host names or addresses"),
    }).transform((w) => ({ allowHosts: w.allow_hosts })),
    spawn: section({
      max_concurrent: positiveInt().default(2),
      timeout: duration({ allowZero: false }).prefault("20m"),
    }).transform((s) => ({ maxConcurrent: s.max_concurrent, timeoutMs: s.timeout })),
  }).transform((t) => ({
    restrictToWorkspace: t.restrict_to_workspace,
    /** As written; load.ts resolves them against the file's folder. */
    readOnlyRoots: t.read_only_roots,
    /** The tools may write the workspace's skills, which become the agent's standing instructions. */
    writableSkills: t.writable_skills,
    exec: t.exec,
    web: t.web,
    spawn: t.spawn,
  })),
  /** MCP servers whose tools the agent may use (src/tools/mcp/). */
  mcp_servers: mcpServersSchema,
  approve: approveSchema
    .optional()
    .describe("Tool calls that wait for a person's yes before they run, for every job without its own approve: (src/approvals/)."),
}).transform(({ workspace, state_dir, logs_dir, jobs_dir, secrets, job_env, mcp_servers, ...settings }) => ({
  ...settings,
  /** `cwd` as written; load.ts resolves it against the file's folder. */
  mcpServers: mcp_servers,
  /** As written; load.ts resolves them against the file's folder. */
  paths: { workspace, state: state_dir, logs: logs_dir, jobs: jobs_dir },
  /** Names of environment variables whose values are redacted from every log. */
  secretNames: secrets,
  /** The only environment variables the `${VAR}` references of job files may name. */
  jobEnv: job_env,
}));

/** "127.0.0.1:7420" or "[::1]:0" as a host (without brackets) and a port; 0 picks a free port. */
function listenAddress(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(":");
  return { host: text.slice(0, colon).replace(/^\[(.*)\]$/, "$1"), port: Number(text.slice(colon + 1)) };
}

/** Only addresses of this machine: a console on another interface needs console.allow_remote. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** "08:00-21:00" as minutes after midnight; the regular expression before it has checked the form. */
function timeRange(text: string): { start: number; end: number } {
  const [start, end] = text.split("-").map((hhmm) => {
    const [hours, minutes] = hhmm.split(":").map(Number);
    return hours! * 60 + minutes!;
  });
  return { start: start!, end: end! };
}

export type ConfigFile = z.output<typeof configSchema>;

/** The provider section with what load.ts resolves from the preset and the environment: endpoint, key and model. */
export type ProviderConfig = Omit<ConfigFile["provider"], "model"> & { model: string };
export type SmtpConfig = NonNullable<ConfigFile["smtp"]>;
export type AttachmentLimits = ConfigFile["attachments"];
export type RetentionConfig = ConfigFile["retention"];
export type ConsoleConfig = ConfigFile["console"];
export type ClusterConfig = NonNullable<ConfigFile["cluster"]>;
/** `timezone`: countd.yaml's when the heartbeat names none; `checklist`: absolute. */
export type HeartbeatConfig = Omit<ConfigFile["heartbeat"], "timezone"> & { timezone: string };
/** `timezone`: countd.yaml's when the budget names none. */
export type BudgetConfig = DaemonBudget;

/** The file's value with what load.ts resolves: `paths` and `tools.readOnlyRoots` absolute. */
export interface Config extends Omit<ConfigFile, "provider" | "heartbeat" | "budget"> {
  /** Absolute path of the file read; undefined when running on defaults. */
  file?: string;
  provider: ProviderConfig;
  heartbeat: HeartbeatConfig;
  budget: BudgetConfig;
  /** Values to redact from every log: the API key and the named environment variables' values. */
  secrets: string[];
}
