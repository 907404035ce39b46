import { readFile } from "node:fs/promises";
import path from "node:path";
import { isMap, isScalar, type Node, type Pair } from "yaml";
import { isSecretKey } from "../audit/redact.js";
import { referenceProblems } from "../delivery/secrets.js";
import { deliveryTargetsSchema, type DeliveryTarget } from "../delivery/targets.js";
import { PRESET_NAMES, PRESETS, type PresetName } from "../providers/presets.js";
import { ConfigError } from "./errors.js";
import { interpolateEnv } from "./interpolate.js";
import { placementProblems } from "./placement.js";
import { describeValue, httpURL } from "./fields.js";
import { configSchema, isLoopback, listenSchema, type Config, type ConfigFile, type ProviderConfig } from "./schema.js";
import { formatPath, formatProblems, parseYaml, zodProblems, type Problem, type YamlPath, type YamlSource } from "./yaml-errors.js";

export const DEFAULT_CONFIG_FILE = "countd.yaml";

/** What a command talks to, and so the parts of countd.yaml that hold its secrets. */
export const CONFIG_NEEDS = ["provider", "smtp", "deliveries", "mcp"] as const;
export type ConfigNeed = (typeof CONFIG_NEEDS)[number];

export interface LoadConfigOptions {
  /** `--config FILE`; when absent, ./countd.yaml is read if it exists. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * What the command uses: the LLM provider, the mail server, the heartbeat's delivery targets,
   * the MCP servers; default all of it (the daemon). A `${VAR}` left unset in the provider or
   * smtp section of a command that does not use it is no problem: that section is not read (in
   * mcp_servers it is read as empty, so the section is still checked). The heartbeat's
   * targets are looked up only when used. So `countd jobs` works without the provider key.
   */
  needs?: readonly ConfigNeed[];
}

/**
 * Reads, interpolates, validates and resolves countd.yaml. Every problem found is reported at
 * once in one ConfigError. A missing API key is not a problem here (see requireApiKey): commands
 * that never call the LLM must load the configuration without one.
 */
export async function loadConfig(opts: LoadConfigOptions = {}): Promise<Config> {
  const env = opts.env ?? process.env;
  const needs: ReadonlySet<ConfigNeed> = new Set(opts.needs ?? CONFIG_NEEDS);
  const cwd = opts.cwd ?? process.cwd();
  const name = opts.file ?? DEFAULT_CONFIG_FILE;
  const file = path.resolve(cwd, name);
  const text = await readConfigText(file, name, opts.file !== undefined);

  let source: YamlSource | undefined;
  let data: unknown = {};
  /** What mcp_servers holds that is secret (mcpSecrets). */
  let secretValues: string[] = [];
  const problems: Problem[] = [];
  if (text !== undefined) {
    const parsed = parseYaml(name, text);
    // Validating a document that did not parse would only add noise to the real error.
    if (parsed.syntaxErrors.length > 0) throw new ConfigError(parsed.syntaxErrors);
    source = parsed.source;
    const unused = (at: YamlPath) =>
      ((at[0] === "provider" || at[0] === "smtp") && !needs.has(at[0])) || (at[0] === MCP_SECTION && !needs.has("mcp"));
    const secret = needs.has("mcp") ? mcpSecrets(source) : { paths: [], names: [] };
    const interpolated = interpolateOutsideTargets(source, env, unused);
    problems.push(...interpolated.problems);
    data = withoutSections(
      source.doc.toJS(),
      interpolated.unresolved.filter((at) => at[0] !== MCP_SECTION),
    );
    const filledIn = secret.paths.map((at) => parsed.source.doc.getIn(at));
    secretValues = [...filledIn, ...secret.names.map((name) => env[name])].filter((value): value is string => typeof value === "string");
  }

  const result = configSchema.safeParse(data);
  const targets = result.success ? result.data.heartbeat.deliver : writtenTargets(data);
  if (source && targets) problems.push(...referenceProblems(targets, needs.has("deliveries") ? env : null, source, HEARTBEAT_TARGETS));
  if (!result.success) {
    // A value whose variable was unset is already reported; its failed validation would repeat it.
    const reported = new Set(problems.map((problem) => formatPath(problem.path)));
    problems.push(...zodProblems(result.error, configSchema).filter((problem) => !reported.has(formatPath(problem.path))));
    throw new ConfigError(formatProblems(source, problems));
  }
  if (result.data.heartbeat.enabled && result.data.heartbeat.deliver.length === 0) problems.push(noTargetsProblem(source));

  const resolved = resolve(result.data, env, source ? path.dirname(file) : cwd, secretValues);
  problems.push(...resolved.problems, ...(await placementProblems(resolved.config.paths, source ? path.dirname(file) : undefined)));
  const lines = [...formatProblems(source, problems), ...resolved.envProblems];
  if (lines.length > 0) throw new ConfigError(lines);
  return { file: source ? file : undefined, ...resolved.config };
}

const HEARTBEAT_TARGETS = ["heartbeat", "deliver"] as const;
const MCP_SECTION = "mcp_servers";

/**
 * What mcp_servers holds that is secret: the `env:` and `headers:` values written with a `${VAR}`
 * (found before interpolation fills them in) or under a name that says secret (Authorization,
 * X-Api-Key, NOTES_TOKEN), and the variables referred to there, whose values may come back alone
 * (a server echoing its token). All are redacted everywhere, like the provider's key.
 */
function mcpSecrets(source: YamlSource): { paths: YamlPath[]; names: string[] } {
  const servers = source.doc.get(MCP_SECTION, true);
  const paths: YamlPath[] = [];
  const names: string[] = [];
  if (!isMap(servers)) return { paths, names };
  for (const server of servers.items) {
    for (const field of ["env", "headers"]) {
      const values = isScalar(server.key) && isMap(server.value) ? server.value.get(field, true) : undefined;
      if (!isScalar(server.key) || !isMap(values)) continue;
      for (const { key, value } of values.items) {
        if (!isScalar(key) || !isScalar(value)) continue;
        const referred = [...String(value.value).matchAll(VARIABLE)].map((match) => match[1]!);
        names.push(...referred);
        if (referred.length > 0 || isSecretKey(String(key.value)))
          paths.push([MCP_SECTION, String(server.key.value), field, String(key.value)]);
      }
    }
  }
  return { paths, names };
}

const VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Interpolates every value but heartbeat.deliver's: delivery targets keep their `${VAR}`
 * references until send time (delivery/secrets.ts), so no secret is written to the outbox.
 */
function interpolateOutsideTargets(source: YamlSource, env: NodeJS.ProcessEnv, deferred: (path: YamlPath) => boolean) {
  const pair = pairOf(source.doc.get("heartbeat", true), "deliver");
  const targets = pair?.value;
  if (pair) pair.value = null;
  try {
    return interpolateEnv(source, env, deferred);
  } finally {
    if (pair) pair.value = targets;
  }
}

/** `data` without the top-level sections holding a value at `paths`: as if they were not written. */
function withoutSections(data: unknown, paths: readonly YamlPath[]): unknown {
  if (paths.length === 0 || !isRecord(data)) return data;
  const sections = new Set(paths.map((at) => at[0]));
  return Object.fromEntries(Object.entries(data).filter(([key]) => !sections.has(key)));
}

/** heartbeat.deliver when it is valid though another section is not: its references are reported with the rest. */
function writtenTargets(data: unknown): DeliveryTarget[] | undefined {
  const heartbeat = isRecord(data) && isRecord(data.heartbeat) ? data.heartbeat : {};
  const parsed = deliveryTargetsSchema.safeParse(heartbeat.deliver);
  return parsed.success ? parsed.data : undefined;
}

/** An enabled heartbeat with nowhere to send check-ins: at `deliver:` when written, else at `heartbeat:`. */
function noTargetsProblem(source: YamlSource | undefined): Problem {
  const heartbeatKey = pairOf(source?.doc.contents, "heartbeat")?.key as Node | undefined;
  const written = source?.doc.hasIn(HEARTBEAT_TARGETS) ?? false;
  return {
    path: HEARTBEAT_TARGETS,
    at: "key",
    message: "name at least one target: the heartbeat is enabled and its check-ins would go nowhere",
    offset: written ? undefined : heartbeatKey?.range?.[0],
  };
}

function pairOf(node: unknown, key: string): Pair | undefined {
  return isMap(node) ? node.items.find((item) => isScalar(item.key) && item.key.value === key) : undefined;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

async function readConfigText(file: string, name: string, explicit: boolean): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" && !explicit) return undefined;
    throw new ConfigError([`${name}: ${code === "ENOENT" ? "no such file" : `cannot read: ${(err as Error).message}`}`]);
  }
}

interface Resolved {
  config: Omit<Config, "file">;
  /** Placed in the file. */
  problems: Problem[];
  /** About environment variables, so not placed in the file. */
  envProblems: string[];
}

function resolve(data: ConfigFile, env: NodeJS.ProcessEnv, dir: string, mcpSecretValues: readonly string[]): Resolved {
  const problems: Problem[] = [];
  const envProblems: string[] = [];
  const provider = resolveProvider(data.provider, env, problems, envProblems);

  const { workspace, state, logs, jobs } = data.paths;
  const paths = {
    workspace: path.resolve(dir, workspace),
    state: path.resolve(dir, state),
    logs: path.resolve(dir, logs),
    jobs: path.resolve(dir, jobs),
  };

  // Every provider's key variable, not just the configured one: a job may switch provider.
  const keyNames = new Set(Object.values(PRESETS).flatMap((preset) => preset.apiKeyEnv));
  const secretNames = new Set([...data.secretNames, ...keyNames]);
  data.tools.exec.envNames.forEach((name, index) => {
    if (secretNames.has(name)) {
      problems.push({ path: ["tools", "exec", "env", index], message: `${name} holds a secret, and secrets never reach tools` });
    }
  });
  // Job files may hold a webhook's own token (a listed secret), never the provider's key.
  data.jobEnv.forEach((name, index) => {
    if (keyNames.has(name))
      problems.push({ path: ["job_env", index], message: `${name} holds a provider's key, which job files must never reach` });
  });

  const consoleSettings = consoleWithOverride(data.console, env, envProblems);

  const secretValues = [
    provider.apiKey,
    data.smtp?.password,
    ...redisSecrets(data.cluster?.redis),
    ...[...secretNames].map((name) => env[name]),
    // A job_env variable exists to be filled into a job's targets: a webhook's token, a chat URL.
    ...data.jobEnv.map((name) => env[name]),
    ...mcpSecretValues,
  ];
  const settings = data;
  return {
    config: {
      ...settings,
      provider,
      paths,
      console: consoleSettings,
      heartbeat: {
        ...data.heartbeat,
        timezone: data.heartbeat.timezone ?? data.timezone,
        checklist: path.resolve(paths.workspace, data.heartbeat.checklist),
      },
      budget: { ...data.budget, timezone: data.budget.timezone ?? data.timezone },
      tools: { ...data.tools, readOnlyRoots: data.tools.readOnlyRoots.map((root) => path.resolve(dir, root)) },
      // A stdio server runs in the file's folder unless it names another.
      mcpServers: data.mcpServers.map((server) =>
        server.transport.kind === "stdio"
          ? { ...server, transport: { ...server.transport, cwd: path.resolve(dir, server.transport.cwd ?? ".") } }
          : server,
      ),
      secrets: [...new Set(secretValues.filter((value): value is string => !!value))],
    },
    problems,
    envProblems,
  };
}

/**
 * A job's provider override: that preset's endpoint, key and model from the environment (or its
 * defaults); temperature, token limit, attempts and timeout as configured.
 */
export function providerForPreset(preset: PresetName, base: ProviderConfig, env: NodeJS.ProcessEnv = process.env): ProviderConfig {
  const problems: Problem[] = [];
  const envProblems: string[] = [];
  const { COUNTD_PROVIDER: _provider, COUNTD_MODEL: _model, ...rest } = env;
  const resolved = resolveProvider(
    { preset, temperature: base.temperature, maxTokens: base.maxTokens, attempts: base.attempts, timeoutMs: base.timeoutMs },
    rest,
    problems,
    envProblems,
  );
  const lines = [...problems.map((p) => `provider "${preset}": ${formatPath(p.path)}: ${p.message}`), ...envProblems];
  if (lines.length > 0) throw new ConfigError(lines);
  return resolved;
}

/** Precedence for each setting: the file > the preset's environment variables > the preset's default. */
function resolveProvider(
  file: Omit<ConfigFile["provider"], "baseURL" | "apiKey" | "model"> & Partial<ConfigFile["provider"]>,
  env: NodeJS.ProcessEnv,
  problems: Problem[],
  envProblems: string[],
): ProviderConfig {
  const override = env.COUNTD_PROVIDER || undefined;
  if (override !== undefined && !isPresetName(override)) {
    envProblems.push(`COUNTD_PROVIDER: expected one of ${PRESET_NAMES.join(", ")}, got ${describeValue(override)}`);
  }
  const preset = override !== undefined && isPresetName(override) ? override : file.preset;
  const defaults = PRESETS[preset];
  // The file's endpoint, key and model were written for the file's preset; another preset chosen
  // through COUNTD_PROVIDER would be sent them (a key to the wrong host), so it starts from its own.
  const own: Partial<ConfigFile["provider"]> = preset === file.preset ? file : {};

  let baseURL = own.baseURL;
  if (baseURL === undefined) {
    const fromEnv = firstSet(env, defaults.baseURLEnv);
    if (fromEnv && !httpURL.safeParse(fromEnv.value).success) {
      envProblems.push(`${fromEnv.name}: expected an http(s) URL, got ${describeValue(fromEnv.value)}`);
    }
    baseURL = fromEnv?.value ?? defaults.baseURL;
  }
  if (baseURL === undefined && defaults.protocol === "openai") {
    problems.push({ path: ["provider", "base_url"], message: `required for preset "${preset}"` });
  }

  const model = env.COUNTD_MODEL || own.model || defaults.model;
  if (model === undefined) {
    problems.push({ path: ["provider", "model"], message: `required for preset "${preset}" (or set COUNTD_MODEL)` });
  }

  const apiKey = own.apiKey || firstSet(env, defaults.apiKeyEnv)?.value;
  return { ...file, preset, baseURL, apiKey, model: model ?? "" };
}

/**
 * COUNTD_CONSOLE_LISTEN replaces console.listen, as COUNTD_MODEL replaces the model: a second
 * daemon on the machine, or a test suite, picks another port without editing countd.yaml.
 */
function consoleWithOverride(settings: ConfigFile["console"], env: NodeJS.ProcessEnv, envProblems: string[]): ConfigFile["console"] {
  const override = env.COUNTD_CONSOLE_LISTEN || undefined;
  if (override === undefined) return settings;
  const parsed = listenSchema.safeParse(override);
  if (!parsed.success) {
    envProblems.push(`COUNTD_CONSOLE_LISTEN: expected a host and port like "127.0.0.1:7420", got ${describeValue(override)}`);
    return settings;
  }
  if (!settings.allowRemote && !isLoopback(parsed.data.host)) {
    envProblems.push(
      `COUNTD_CONSOLE_LISTEN: ${override} is not a loopback address; set console.allow_remote: true to listen beyond this machine (behind a TLS reverse proxy)`,
    );
    return settings;
  }
  return { ...settings, listen: parsed.data };
}

/**
 * What of cluster.redis must never reach a log: its password, and over rediss:// (a hosted Redis,
 * whose user name is often a token too) the user name as well.
 */
function redisSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  const parsed = new URL(url);
  // As written (percent-encoded) and as sent; a stray % leaves only the first.
  const decoded = (part: string) => (part === "" ? [] : [part, ...tryDecode(part)]);
  return [...decoded(parsed.password), ...(parsed.protocol === "rediss:" ? decoded(parsed.username) : [])];
}

function tryDecode(part: string): string[] {
  try {
    return [decodeURIComponent(part)];
  } catch {
    return [];
  }
}

function isPresetName(name: string): name is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(name);
}

/** Empty counts as unset: `FOO=` in an env file should not become an empty key or URL. */
function firstSet(env: NodeJS.ProcessEnv, names: readonly string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name];
    if (value) return { name, value };
  }
  return undefined;
}
