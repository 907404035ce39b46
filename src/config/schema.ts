import bytes from "bytes";
import ms from "ms";
import { z } from "zod";
import { DEFAULT_PERSONA, PERSONALITY_PRESETS, type Locale, type PersonaConfig } from "../agent/personalities.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import { PRESET_NAMES, type PresetName } from "../providers/presets.js";

/** How a value the user wrote is quoted back in a message. */
export function describeValue(input: unknown): string {
  if (input === undefined || input === null) return "nothing";
  if (Array.isArray(input)) return "a list";
  if (typeof input === "object") return "a mapping";
  // A pasted log or a generated string quoted whole would bury the message (and bloat the log line).
  if (typeof input === "string" && input.length > MAX_QUOTED_LENGTH) {
    return `${quoted(input.slice(0, MAX_QUOTED_LENGTH))}… (${input.length} characters)`;
  }
  return quoted(input);
}

/** JSON's quoting, with what it leaves as is but a terminal or an editor would act on (DEL, C1, bidi controls) escaped too. */
const quoted = (input: unknown): string =>
  (JSON.stringify(input) ?? String(input)).replace(/[\p{C}\p{Zl}\p{Zp}]/gu, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`);

const MAX_QUOTED_LENGTH = 80;

/** What kind of value the user wrote, without quoting it. */
export function describeKind(input: unknown): string {
  if (typeof input === "string") return input === "" ? "nothing" : "text";
  if (typeof input === "number") return "a number";
  if (typeof input === "boolean") return "true or false";
  return describeValue(input);
}

export const expected = (what: string) => ({
  error: (issue: { input?: unknown }) => `expected ${what}, got ${describeValue(issue.input)}`,
});

/** `${VAR}` interpolation always yields a string, so numeric fields take numeric strings too. */
const numeric = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v)) ? Number(v) : v), schema);

const positiveInt = () => {
  const message = expected("a positive integer");
  return numeric(z.number(message).int(message).positive(message));
};

export const text = () => z.string(expected("a string")).min(1, expected("a non-empty string"));

/** `${VAR}` yields "true"/"false", so switches take those strings too. */
const bool = () =>
  z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean(expected("true or false")));

const envName = () =>
  z.string(expected("an environment variable name")).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, expected("an environment variable name"));

const list = <T extends z.ZodType>(item: T, what: string) => z.array(item, expected(`a list of ${what}`)).default([]);

const regex = () =>
  text().refine(
    (pattern) => {
      try {
        new RegExp(pattern);
        return true;
      } catch {
        return false;
      }
    },
    { error: (issue) => `expected a regular expression, got ${describeValue(issue.input)}` },
  );

/** Empty counts as not given: `${VAR:-}` is how a file says "only if set". */
const unlessEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === "" ? undefined : v), schema.optional());

export const httpURL = z.url({ protocol: /^https?$/, ...expected('an http(s) URL like "https://api.example.com/v1"') });

/**
 * The longest duration taken: far beyond any real timeout or interval, and small enough that a
 * date this far ahead still exists (a scheduler given `every: 1e300` would compute Invalid Dates).
 */
export const MAX_DURATION_MS = 100 * 365 * 24 * 3_600_000;

/** "1s", "10m", "500ms", or a number of seconds; parsed to milliseconds. */
export const duration = ({ allowZero }: { allowZero: boolean }) => {
  const what = `a ${allowZero ? "" : "positive "}duration like "30s", "10m", "500ms" or a number of seconds`;
  return z.union([z.number(), z.string()], expected(what)).transform((value, ctx) => {
    const milliseconds = toMilliseconds(value);
    if (milliseconds === undefined || milliseconds < 0 || (!allowZero && milliseconds === 0)) {
      ctx.issues.push({ code: "custom", input: value, message: `expected ${what}, got ${describeValue(value)}` });
      return z.NEVER;
    }
    if (milliseconds > MAX_DURATION_MS) {
      ctx.issues.push({ code: "custom", input: value, message: `expected a duration of at most 100 years, got ${describeValue(value)}` });
      return z.NEVER;
    }
    return milliseconds;
  });
};

function toMilliseconds(value: number | string): number | undefined {
  const seconds = typeof value === "number" ? value : value.trim() === "" ? Number.NaN : Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  // ms() throws on "" rather than returning undefined.
  if (typeof value === "number" || value.trim() === "") return undefined;
  const parsed = ms(value as ms.StringValue) as number | undefined;
  return parsed !== undefined && Number.isFinite(parsed) ? parsed : undefined;
}

/** "10MB", "512KB", "1.5GB" (units of 1,024), or a number of bytes; parsed to bytes. */
const byteSize = () => {
  const what = 'a size like "10MB", "512KB" or a number of bytes';
  return z.union([z.number(), z.string()], expected(what)).transform((value, ctx) => {
    const size = typeof value === "number" ? value : bytes.parse(value.trim());
    if (size === null || !Number.isSafeInteger(size) || size <= 0) {
      ctx.issues.push({ code: "custom", input: value, message: `expected ${what}, got ${describeValue(value)}` });
      return z.NEVER;
    }
    return size;
  });
};

/** Longer than any IANA name; ICU takes seconds to refuse a name of a few hundred kilobytes. */
const MAX_TIME_ZONE_LENGTH = 64;

export function isTimeZone(name: string): boolean {
  if (name.length > MAX_TIME_ZONE_LENGTH) return false;
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

const systemTimeZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** A section left empty in YAML (`agent:` with every line commented out) is null: treat it as absent. */
const section = <T extends z.core.$ZodLooseShape>(shape: T) =>
  z.preprocess((v) => v ?? {}, z.strictObject(shape, expected("a mapping")));

const LOCALES = ["zh", "en"] as const satisfies readonly Locale[];
export const SANDBOX_MODES = ["auto", "bwrap", "none"] as const;
const PERSONALITIES = [...PERSONALITY_PRESETS, "custom"] as const;

export const oneOf = <T extends readonly [string, ...string[]]>(values: T) => z.enum(values, expected(`one of ${values.join(", ")}`));

/** countd.yaml as written (snake_case), with defaults applied and durations in milliseconds. */
export const configSchema = section({
  provider: section({
    preset: oneOf(PRESET_NAMES).default("openai"),
    base_url: unlessEmpty(httpURL),
    api_key: unlessEmpty(z.string(expected("a string"))),
    model: unlessEmpty(text()),
    temperature: numeric(z.number(expected("a number from 0 to 2")).min(0, expected("a number from 0 to 2")).max(2, expected("a number from 0 to 2"))).default(0.7),
    max_tokens: positiveInt().default(4096),
    attempts: positiveInt().default(3),
    timeout: duration({ allowZero: false }).prefault("10m"),
  }),
  agent: section({
    max_iterations: positiveInt().default(25),
    max_retries: positiveInt().default(3),
    retry_delay: duration({ allowZero: true }).prefault("1s"),
    max_history: positiveInt().default(100),
  }),
  persona: section({
    name: text().default(DEFAULT_PERSONA.name),
    user_name: unlessEmpty(text()),
    personality: oneOf(PERSONALITIES).default(DEFAULT_PERSONA.personality),
    custom_personality: unlessEmpty(text()),
    locale: oneOf(LOCALES).default(DEFAULT_PERSONA.locale),
  }).refine((persona) => persona.personality !== "custom" || persona.custom_personality !== undefined, {
    path: ["personality"],
    message: '"custom" needs persona.custom_personality (the personality text)',
  }),
  timezone: text()
    .refine(isTimeZone, { error: (issue) => `expected an IANA time zone name like "Asia/Shanghai", got ${describeValue(issue.input)}` })
    .default(systemTimeZone),
  workspace: text().default("./workspace"),
  state_dir: text().default("./state"),
  logs_dir: text().default("./logs"),
  jobs_dir: text().default("./jobs"),
  smtp: z.preprocess(
    (v) => (v === null ? undefined : v),
    z
      .strictObject(
        {
          host: text(),
          port: numeric(z.number(expected("a port number")).int(expected("a port number")).min(1, expected("a port number")).max(65535, expected("a port number"))).default(587),
          secure: bool().default(false),
          user: unlessEmpty(text()),
          password: unlessEmpty(text()),
          from: text(),
        },
        expected("a mapping"),
      )
      .optional(),
  ),
  attachments: section({
    max_file_size: byteSize().prefault("10MB"),
    max_message_size: byteSize().prefault("25MB"),
  }),
  runner: section({
    concurrency: positiveInt().default(2),
    shutdown_grace: duration({ allowZero: true }).prefault("30s"),
  }),
  retention: section({
    sessions: duration({ allowZero: false }).prefault("30d"),
    tool_history: duration({ allowZero: false }).prefault("30d"),
    audit: duration({ allowZero: false }).prefault("30d"),
  }),
  heartbeat: section({
    enabled: bool().default(false),
    every: duration({ allowZero: false }).prefault("30m"),
    active_hours: z
      .string(expected('a time range like "08:00-21:00"'))
      .regex(/^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/, expected('a time range like "08:00-21:00"'))
      .default("08:00-21:00"),
    timezone: unlessEmpty(
      text().refine(isTimeZone, { error: (issue) => `expected an IANA time zone name like "Asia/Shanghai", got ${describeValue(issue.input)}` }),
    ),
    idle_threshold: duration({ allowZero: true }).prefault("4h"),
    max_per_day: positiveInt().default(2),
    checklist: text().default("HEARTBEAT.md"),
    // Its items are checked in load.ts: the delivery schema imports this module, so cannot be used here.
    deliver: z.array(z.unknown(), expected("a list of delivery targets")).default([]),
  }),
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
    }),
    web: section({
      allow_hosts: list(text(), "host names or addresses"),
    }),
    spawn: section({
      max_concurrent: positiveInt().default(2),
      timeout: duration({ allowZero: false }).prefault("20m"),
    }),
  }),
});

export type ConfigFile = z.output<typeof configSchema>;

export interface ProviderConfig {
  preset: PresetName;
  /** Undefined only for anthropic without an override: the SDK's default then applies. */
  baseURL?: string;
  apiKey?: string;
  model: string;
  temperature: number;
  maxTokens: number;
  /** Requests per LLM call, the first included. */
  attempts: number;
  /** Per LLM request. */
  timeoutMs: number;
}

export interface AgentConfig {
  maxIterations: number;
  /** Attempts per tool call. */
  maxRetries: number;
  retryDelayMs: number;
  maxHistory: number;
}

export interface Config {
  /** Absolute path of the file read; undefined when running on defaults. */
  file?: string;
  provider: ProviderConfig;
  agent: AgentConfig;
  persona: PersonaConfig;
  /** IANA name. */
  timezone: string;
  /** Absolute. */
  paths: { workspace: string; state: string; logs: string; jobs: string };
  /** Values to redact from every log: the API key and the named environment variables' values. */
  secrets: string[];
  /** The only environment variables the `${VAR}` references of job files may name. */
  jobEnv: string[];
  tools: ToolsConfig;
  runner: { concurrency: number; shutdownGraceMs: number };
  /** Undefined: mail is written as .eml files under the state directory instead of sent. */
  smtp?: SmtpConfig;
  attachments: AttachmentLimits;
  heartbeat: HeartbeatConfig;
  retention: RetentionConfig;
}

/** How long files are kept after their last write; pruned by the daemon (store/retention.ts). */
export interface RetentionConfig {
  sessionsMs: number;
  toolHistoryMs: number;
  auditMs: number;
}

/** Bytes a mail may attach: per file and in all. */
export interface AttachmentLimits {
  maxFileBytes: number;
  maxMessageBytes: number;
}

export interface SmtpConfig {
  host: string;
  port: number;
  /** TLS from the start (port 465); otherwise STARTTLS when the server offers it. */
  secure: boolean;
  user?: string;
  password?: string;
  from: string;
}

export interface HeartbeatConfig {
  enabled: boolean;
  everyMs: number;
  /** Minutes after midnight in `timezone`; end before start means the range wraps past midnight. */
  activeHours: { start: number; end: number };
  timezone: string;
  idleThresholdMs: number;
  maxPerDay: number;
  /** Absolute path of the checklist (HEARTBEAT.md in the workspace by default). */
  checklist: string;
  /** Where check-ins go; never empty when enabled. `${VAR}` references stay unresolved (see delivery/secrets.ts). */
  deliver: DeliveryTarget[];
}

export interface ToolsConfig {
  restrictToWorkspace: boolean;
  /** Absolute. */
  readOnlyRoots: string[];
  /** The tools may write the workspace's skills, which become the agent's standing instructions. */
  writableSkills: boolean;
  exec: {
    enabled: boolean;
    timeoutMs: number;
    sandbox: (typeof SANDBOX_MODES)[number];
    network: boolean;
    denyPatterns: string[];
    allowList: string[];
    /** Environment variables passed to commands beside PATH, HOME, LANG, LC_ALL and TZ. */
    envNames: string[];
  };
  web: { allowHosts: string[] };
  spawn: { maxConcurrent: number; timeoutMs: number };
}
