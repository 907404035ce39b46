import { z } from "zod";
import { DEFAULT_PERSONA, PERSONALITY_PRESETS, type Locale, type PersonaConfig } from "../agent/personalities.js";
import { deliveryTargetsSchema, type DeliveryTarget } from "../delivery/targets.js";
import { PRESET_NAMES, type PresetName } from "../providers/presets.js";
import { bool, byteSize, duration, envName, expected, httpURL, list, numeric, oneOf, positiveInt, regex, section, text, timeZone, unlessEmpty } from "./fields.js";

const systemTimeZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

const LOCALES = ["zh", "en"] as const satisfies readonly Locale[];
export const SANDBOX_MODES = ["auto", "bwrap", "none"] as const;
const PERSONALITIES = [...PERSONALITY_PRESETS, "custom"] as const;

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
  timezone: timeZone().default(systemTimeZone),
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
    timezone: unlessEmpty(timeZone()),
    idle_threshold: duration({ allowZero: true }).prefault("4h"),
    max_per_day: positiveInt().default(2),
    checklist: text().default("HEARTBEAT.md"),
    deliver: deliveryTargetsSchema,
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
