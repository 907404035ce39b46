import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors.js";
import { loadConfig, type ConfigNeed } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";

const DAY_MS = 24 * 3_600_000;
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SYSTEM_TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

let dir: string;

const defaultHeartbeat = (workspace: string): Config["heartbeat"] => ({
  enabled: false,
  everyMs: 1_800_000,
  activeHours: { start: 8 * 60, end: 21 * 60 },
  timezone: SYSTEM_TIME_ZONE,
  idleThresholdMs: 4 * 3_600_000,
  maxPerDay: 2,
  checklist: path.join(workspace, "HEARTBEAT.md"),
  deliver: [],
  provider: undefined,
  model: undefined,
  budget: {},
});

const DEFAULT_TOOLS: Config["tools"] = {
  restrictToWorkspace: true,
  readOnlyRoots: [],
  writableSkills: false,
  exec: { enabled: true, timeoutMs: 60_000, sandbox: "auto", network: false, denyPatterns: [], allowList: [], envNames: [] },
  web: { allowHosts: [] },
  spawn: { maxConcurrent: 2, timeoutMs: 1_200_000 },
};

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "countd-config-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(text: string, name = "countd.yaml"): Promise<string> {
  const file = path.join(dir, name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
  return file;
}

/** Loads ./countd.yaml from the temp dir with only the given environment. */
async function load(text: string, env: NodeJS.ProcessEnv = {}): Promise<Config> {
  await writeConfig(text);
  return loadConfig({ cwd: dir, env });
}

async function problems(text: string, env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const error = await load(text, env).then(
    () => expect.unreachable("the config should have been rejected"),
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).message).toBe((error as ConfigError).problems.join("\n"));
  return [...(error as ConfigError).problems];
}

describe("loadConfig", () => {
  it("runs on defaults when there is no countd.yaml", async () => {
    const config = await loadConfig({ cwd: dir, env: {} });
    expect(config).toEqual({
      provider: {
        preset: "openai",
        baseURL: "https://api.openai.com/v1",
        model: "gpt-4o-mini",
        temperature: 0.7,
        maxTokens: 4096,
        attempts: 3,
        timeoutMs: 600_000,
      },
      agent: {
        maxIterations: 25,
        maxRetries: 3,
        retryDelayMs: 1000,
        maxHistory: 100,
        breaker: { sameCall: 3, errorsInARow: 5, idleIterations: 8 },
      },
      persona: { name: "countd", personality: "gentle", locale: "en" },
      timezone: SYSTEM_TIME_ZONE,
      paths: {
        workspace: path.join(dir, "workspace"),
        state: path.join(dir, "state"),
        logs: path.join(dir, "logs"),
        jobs: path.join(dir, "jobs"),
      },
      secrets: [],
      jobEnv: [],
      secretNames: [],
      tools: DEFAULT_TOOLS,
      mcpServers: [],
      runner: { concurrency: 2, shutdownGraceMs: 30_000 },
      retention: { sessionsMs: 30 * DAY_MS, toolHistoryMs: 30 * DAY_MS, auditMs: 30 * DAY_MS },
      attachments: { maxFileBytes: 10 * 1024 * 1024, maxMessageBytes: 25 * 1024 * 1024 },
      heartbeat: defaultHeartbeat(path.join(dir, "workspace")),
      console: { enabled: true, listen: { host: "127.0.0.1", port: 7420 }, allowRemote: false, metricsPublic: false },
      prices: {},
      budget: { timezone: SYSTEM_TIME_ZONE },
    });
  });

  it("fails when the file named with --config does not exist", async () => {
    await expect(loadConfig({ file: "missing.yaml", cwd: dir, env: {} })).rejects.toThrow(new ConfigError(["missing.yaml: no such file"]));
  });

  it("reads every key", async () => {
    const config = await load(
      `provider:
  preset: zhipu
  base_url: http://127.0.0.1:9999/v4
  api_key: key-from-file
  model: glm-4-plus
  temperature: 0.2
  max_tokens: 1024
  attempts: 5
  timeout: 90s
agent:
  max_iterations: 10
  max_retries: 2
  retry_delay: 500ms
  max_history: 40
  breaker:
    same_call: 4
    errors_in_a_row: 6
    idle_iterations: 10
persona:
  name: Tock
  user_name: Ada
  personality: custom
  custom_personality: Dry and exact.
  locale: zh
timezone: Asia/Shanghai
workspace: ws
state_dir: st
logs_dir: lg
secrets: [SMTP_PASSWORD]
job_env: [REPORT_HOOK_URL, SMTP_PASSWORD]
console:
  enabled: false
  listen: "[::1]:0"
  allow_remote: true
  metrics_public: true
`,
      { SMTP_PASSWORD: "hunter2" },
    );
    expect(config).toEqual({
      file: path.join(dir, "countd.yaml"),
      provider: {
        preset: "zhipu",
        baseURL: "http://127.0.0.1:9999/v4",
        apiKey: "key-from-file",
        model: "glm-4-plus",
        temperature: 0.2,
        maxTokens: 1024,
        attempts: 5,
        timeoutMs: 90_000,
      },
      agent: {
        maxIterations: 10,
        maxRetries: 2,
        retryDelayMs: 500,
        maxHistory: 40,
        breaker: { sameCall: 4, errorsInARow: 6, idleIterations: 10 },
      },
      persona: { name: "Tock", userName: "Ada", personality: "custom", customPersonality: "Dry and exact.", locale: "zh" },
      timezone: "Asia/Shanghai",
      paths: { workspace: path.join(dir, "ws"), state: path.join(dir, "st"), logs: path.join(dir, "lg"), jobs: path.join(dir, "jobs") },
      secrets: ["key-from-file", "hunter2"],
      jobEnv: ["REPORT_HOOK_URL", "SMTP_PASSWORD"],
      secretNames: ["SMTP_PASSWORD"],
      tools: DEFAULT_TOOLS,
      mcpServers: [],
      runner: { concurrency: 2, shutdownGraceMs: 30_000 },
      retention: { sessionsMs: 30 * DAY_MS, toolHistoryMs: 30 * DAY_MS, auditMs: 30 * DAY_MS },
      attachments: { maxFileBytes: 10 * 1024 * 1024, maxMessageBytes: 25 * 1024 * 1024 },
      heartbeat: { ...defaultHeartbeat(path.join(dir, "ws")), timezone: "Asia/Shanghai" },
      console: { enabled: false, listen: { host: "::1", port: 0 }, allowRemote: true, metricsPublic: true },
      prices: {},
      budget: { timezone: "Asia/Shanghai" },
    });
  });

  it("refuses a console address beyond this machine unless allow_remote, and takes COUNTD_CONSOLE_LISTEN in place of console.listen", async () => {
    expect(await problems('console:\n  listen: "0.0.0.0:7420"\n')).toEqual([
      expect.stringMatching(
        /^countd\.yaml:2:11: console\.listen: is not a loopback address; the console serves the daemon's controls, so set console\.allow_remote: true/,
      ),
    ]);
    expect(await problems('console:\n  listen: "127.0.0.1:70000"\n')).toEqual([
      expect.stringMatching(/^countd\.yaml:2:11: console\.listen: .*a port from 0 to 65535/),
    ]);
    expect((await load('console:\n  listen: "0.0.0.0:7420"\n  allow_remote: true\n')).console.listen).toEqual({
      host: "0.0.0.0",
      port: 7420,
    });

    expect((await load("", { COUNTD_CONSOLE_LISTEN: "127.0.0.1:0" })).console.listen).toEqual({ host: "127.0.0.1", port: 0 });
    await expect(load("", { COUNTD_CONSOLE_LISTEN: "0.0.0.0:80" })).rejects.toThrow(
      /COUNTD_CONSOLE_LISTEN: 0\.0\.0\.0:80 is not a loopback address/,
    );
    await expect(load("", { COUNTD_CONSOLE_LISTEN: "7420" })).rejects.toThrow(
      'COUNTD_CONSOLE_LISTEN: expected a host and port like "127.0.0.1:7420", got "7420"',
    );
  });

  it("reads attachment limits as sizes, and names a bad one at file:line:col", async () => {
    const config = await load("attachments:\n  max_file_size: 512KB\n  max_message_size: 2097152\n");
    expect(config.attachments).toEqual({ maxFileBytes: 512 * 1024, maxMessageBytes: 2 * 1024 * 1024 });
    expect(await problems("attachments:\n  max_file_size: lots\n  max_message_size: 0\n")).toEqual([
      'countd.yaml:2:18: attachments.max_file_size: expected a size like "10MB", "512KB" or a number of bytes, got "lots"',
      'countd.yaml:3:21: attachments.max_message_size: expected a size like "10MB", "512KB" or a number of bytes, got 0',
    ]);
  });

  it("takes a bare number of seconds as a duration", async () => {
    const config = await load("provider:\n  timeout: 45\nagent:\n  retry_delay: 0\n");
    expect(config.provider.timeoutMs).toBe(45_000);
    expect(config.agent.retryDelayMs).toBe(0);
  });

  it("treats a section with every line commented out as defaults", async () => {
    const config = await load("agent:\n  # max_iterations: 5\n");
    expect(config.agent.maxIterations).toBe(25);
  });

  it("resolves relative paths against the config file's folder, not the working directory", async () => {
    const file = await writeConfig("workspace: ../shared/ws\nstate_dir: st\nlogs_dir: /var/log/countd\n", "conf/prod.yaml");
    const config = await loadConfig({ file, cwd: path.join(dir, "elsewhere"), env: {} });
    expect(config.file).toBe(file);
    expect(config.paths).toEqual({
      workspace: path.join(dir, "shared/ws"),
      state: path.join(dir, "conf/st"),
      logs: "/var/log/countd",
      jobs: path.join(dir, "conf/jobs"),
    });
  });

  it("refuses a state dir inside the workspace", async () => {
    expect(await problems("workspace: .\nstate_dir: ./state\n")).toEqual([
      `countd.yaml:1:1: logs_dir: ${path.join(dir, "logs")} is inside the workspace ${dir}: the agent could rewrite the audit log`,
      `countd.yaml:1:1: jobs_dir: ${path.join(dir, "jobs")} is inside the workspace ${dir}: the agent could write job files, which the daemon runs at once`,
      `countd.yaml:1:12: workspace: ${dir} holds this file's folder ${dir}: the agent could rewrite the configuration`,
      `countd.yaml:2:12: state_dir: ${path.join(dir, "state")} is inside the workspace ${dir}: the agent could edit the daemon's state`,
    ]);
  });

  it("ships an example whose values are the defaults", async () => {
    const example = await loadConfig({ file: path.join(REPO_ROOT, "countd.example.yaml"), cwd: REPO_ROOT, env: {} });
    const defaults = await loadConfig({ cwd: dir, env: {} });
    const { file, ...rest } = example;
    expect(file).toBe(path.join(REPO_ROOT, "countd.example.yaml"));
    const placeless = (config: Config) => ({ ...config, paths: undefined, heartbeat: { ...config.heartbeat, checklist: undefined } });
    expect(placeless(rest)).toEqual(placeless(defaults));
    expect(example.paths.workspace).toBe(path.join(REPO_ROOT, "workspace"));
  });
});

describe("errors point at file:line:col", () => {
  it("names an unknown key at the key", async () => {
    expect(await problems("provider:\n  preset: openai\n  modle: gpt-4o\n")).toEqual([
      'countd.yaml:3:3: provider.modle: unknown key (did you mean "model"?)',
    ]);
  });

  it("suggests the key meant, in every section, and nothing when none is close", async () => {
    expect(
      await problems("heartbeat:\n  enabeld: true\n  deliver:\n    - email: { too: [a@example.com] }\njobsdir: ./jobs\nfrobnicate: 1\n"),
    ).toEqual([
      'countd.yaml:2:3: heartbeat.enabeld: unknown key (did you mean "enabled"?)',
      "countd.yaml:4:14: heartbeat.deliver[0].email.to: expected an email address or a list of them, got nothing",
      'countd.yaml:4:16: heartbeat.deliver[0].email.too: unknown key (did you mean "to"?)',
      'countd.yaml:5:1: jobsdir: unknown key (did you mean "jobs_dir"?)',
      "countd.yaml:6:1: frobnicate: unknown key",
    ]);
  });

  it("names a wrong type at the value, quoting it", async () => {
    expect(await problems("agent:\n  max_retries: 2\n  max_iterations: lots\n")).toEqual([
      'countd.yaml:3:19: agent.max_iterations: expected a positive integer, got "lots"',
    ]);
  });

  it("turns the breaker off with false, also from ${VAR}, and names a bad limit", async () => {
    expect((await load("agent:\n  breaker: false\n")).agent.breaker).toBe(false);
    expect((await load("agent:\n  breaker: ${BREAKER}\n", { BREAKER: "false" })).agent.breaker).toBe(false);
    expect(await problems("agent:\n  breaker:\n    same_call: 0\n")).toEqual([
      "countd.yaml:3:16: agent.breaker.same_call: expected a positive integer, got 0",
    ]);
    expect(await problems("agent:\n  breaker: on\n")).toEqual([
      'countd.yaml:2:12: agent.breaker: expected false or a mapping with same_call:, errors_in_a_row:, idle_iterations:, got "on"',
    ]);
  });

  it("rejects a bad duration at its position", async () => {
    expect(await problems("provider:\n  timeout: soon\n")).toEqual([
      'countd.yaml:2:12: provider.timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
    ]);
  });

  it("rejects a time zone that is not an IANA name", async () => {
    expect(await problems("# zone\ntimezone: Mars/Olympus_Mons\n")).toEqual([
      'countd.yaml:2:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got "Mars/Olympus_Mons"',
    ]);
  });

  it("reports YAML syntax errors with their position", async () => {
    const [line, ...rest] = await problems("provider:\n  preset: openai\n  model: [gpt\nagent: {}\n");
    expect(rest).toEqual([]);
    expect(line).toMatch(/^countd\.yaml:4:1: /);
  });

  it("reports a duplicate key", async () => {
    expect(await problems("agent:\n  max_retries: 2\n  max_retries: 3\n")).toEqual(["countd.yaml:3:3: Map keys must be unique"]);
  });

  it("reports a file that is not a mapping", async () => {
    expect(await problems("- provider\n")).toEqual(["countd.yaml:1:1: expected a mapping, got a list"]);
  });

  it("reports every problem at once, in file order", async () => {
    expect(
      await problems(`provider:
  preset: gemini
  temprature: 0.5
  max_tokens: -3
agent:
  retry_delay: -1s
persona:
  personality: custom
  locale: fr
secrets: [OK_NAME, not-a-name]
`),
    ).toEqual([
      'countd.yaml:2:11: provider.preset: expected one of openai, deepseek, zhipu, qwen, moonshot, ollama, vllm, custom, anthropic, got "gemini"',
      'countd.yaml:3:3: provider.temprature: unknown key (did you mean "temperature"?)',
      "countd.yaml:4:15: provider.max_tokens: expected a positive integer, got -3",
      'countd.yaml:6:16: agent.retry_delay: expected a duration like "30s", "10m", "500ms" or a number of seconds, got "-1s"',
      'countd.yaml:9:11: persona.locale: expected one of zh, en, got "fr"',
      'countd.yaml:10:20: secrets[1]: expected an environment variable name, got "not-a-name"',
    ]);
  });

  it("asks for the custom personality's text", async () => {
    expect(await problems("persona:\n  personality: custom\n")).toEqual([
      'countd.yaml:2:16: persona.personality: "custom" needs persona.custom_personality (the personality text)',
    ]);
  });

  it("uses the name the file was given by in messages", async () => {
    const file = await writeConfig("agent:\n  max_history: many\n", "conf/prod.yaml");
    await expect(loadConfig({ file: "conf/prod.yaml", cwd: dir, env: {} })).rejects.toThrow(
      'conf/prod.yaml:2:16: agent.max_history: expected a positive integer, got "many"',
    );
    expect(file).toBe(path.join(dir, "conf/prod.yaml"));
  });
});

describe("${VAR} interpolation", () => {
  it("fills string values from the environment, with ${VAR:-default} for unset ones", async () => {
    const config = await load(
      `provider:
  preset: custom
  base_url: "http://\${LLM_HOST}:8080/v1"
  api_key: \${LLM_KEY}
  model: \${LLM_MODEL:-qwen2.5}
  max_tokens: \${MAX_TOKENS}
persona:
  user_name: \${OPERATOR:-}
  name: "\${BOT}"
`,
      { LLM_HOST: "10.0.0.7", LLM_KEY: "sk-env", MAX_TOKENS: "2048", BOT: "12345" },
    );
    expect(config.provider).toMatchObject({
      baseURL: "http://10.0.0.7:8080/v1",
      apiKey: "sk-env",
      model: "qwen2.5",
      maxTokens: 2048,
    });
    expect(config.persona.name).toBe("12345");
    expect(config.persona.userName).toBeUndefined();
  });

  it("reports an unset variable at the reference, naming it, and nothing else for that value", async () => {
    expect(
      await problems(`provider:
  base_url: "https://\${GATEWAY_HOST}/v1"
  max_tokens: \${MAX_TOKENS}
  api_key: \${KEY_A:-} \${KEY_B
  model: \${1ST_MODEL}
`),
    ).toEqual([
      "countd.yaml:2:22: provider.base_url: environment variable GATEWAY_HOST is not set",
      "countd.yaml:3:15: provider.max_tokens: environment variable MAX_TOKENS is not set",
      'countd.yaml:4:23: provider.api_key: unclosed variable reference "${KEY_B": missing "}"',
      'countd.yaml:5:10: provider.model: invalid variable reference "${1ST_MODEL}": expected ${NAME} or ${NAME:-default}',
    ]);
  });

  it("leaves keys alone", async () => {
    expect(await problems("${HOME}: x\n", { HOME: "/root" })).toEqual(["countd.yaml:1:1: ${HOME}: unknown key"]);
  });
});

describe("environment overrides", () => {
  it("COUNTD_MODEL overrides the file's model", async () => {
    const config = await load("provider:\n  preset: qwen\n  model: qwen-plus\n", { COUNTD_MODEL: "qwen-max" });
    expect(config.provider).toMatchObject({ preset: "qwen", model: "qwen-max" });
  });

  it("COUNTD_PROVIDER switches preset, leaving behind the file's endpoint, key and model for the other preset", async () => {
    const config = await load(
      "provider:\n  preset: openai\n  base_url: https://proxy.example/v1\n  api_key: sk-openai\n  model: gpt-4o\n  temperature: 0.1\n",
      { COUNTD_PROVIDER: "deepseek", DEEPSEEK_API_KEY: "sk-deepseek" },
    );
    expect(config.provider).toMatchObject({
      preset: "deepseek",
      baseURL: "https://api.deepseek.com/v1",
      apiKey: "sk-deepseek",
      model: "deepseek-chat",
      temperature: 0.1,
    });
  });

  it("COUNTD_PROVIDER naming the file's own preset keeps the file's settings", async () => {
    const config = await load("provider:\n  preset: custom\n  base_url: http://127.0.0.1:1234/v1\n  model: local\n", {
      COUNTD_PROVIDER: "custom",
    });
    expect(config.provider).toMatchObject({ preset: "custom", baseURL: "http://127.0.0.1:1234/v1", model: "local" });
  });

  it("rejects an unknown COUNTD_PROVIDER", async () => {
    expect(await problems("", { COUNTD_PROVIDER: "gemini" })).toEqual([
      'COUNTD_PROVIDER: expected one of openai, deepseek, zhipu, qwen, moonshot, ollama, vllm, custom, anthropic, got "gemini"',
    ]);
  });
});

describe("provider presets", () => {
  it("gives each preset its endpoint and default model", async () => {
    const expected = {
      openai: ["https://api.openai.com/v1", "gpt-4o-mini"],
      deepseek: ["https://api.deepseek.com/v1", "deepseek-chat"],
      zhipu: ["https://open.bigmodel.cn/api/paas/v4", "glm-4.7-flash"],
      qwen: ["https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus"],
      moonshot: ["https://api.moonshot.cn/v1", "kimi-k2-0905-preview"],
      ollama: ["http://127.0.0.1:11434/v1", "llama3.1"],
      anthropic: [undefined, "claude-sonnet-5"],
    };
    for (const [preset, [baseURL, model]] of Object.entries(expected)) {
      const { provider } = await loadConfig({ cwd: dir, env: { COUNTD_PROVIDER: preset } });
      expect({ preset, baseURL: provider.baseURL, model: provider.model }).toEqual({ preset, baseURL, model });
    }
  });

  it("takes the key from the file, then the preset's own variable, never another vendor's", async () => {
    const env = { DEEPSEEK_API_KEY: "sk-deepseek", OPENAI_API_KEY: "sk-openai" };
    expect((await load("provider: { preset: deepseek, api_key: sk-file }\n", env)).provider.apiKey).toBe("sk-file");
    expect((await load("provider: { preset: deepseek }\n", env)).provider.apiKey).toBe("sk-deepseek");
    expect((await load("provider: { preset: deepseek }\n", { ...env, DEEPSEEK_API_KEY: "" })).provider.apiKey).toBeUndefined();
    expect((await load("provider: { preset: openai }\n", env)).provider.apiKey).toBe("sk-openai");
    expect((await load("provider: { preset: custom, base_url: 'http://127.0.0.1:1/v1', model: m }\n", env)).provider.apiKey).toBe(
      "sk-openai",
    );
  });

  it("takes the base URL from the file, then OPENAI_BASE_URL for openai and custom only, then the preset", async () => {
    const env = { OPENAI_BASE_URL: "http://127.0.0.1:7000/v1" };
    expect((await load("provider: { preset: moonshot, base_url: 'http://127.0.0.1:1/v1' }\n", env)).provider.baseURL).toBe(
      "http://127.0.0.1:1/v1",
    );
    expect((await load("provider: { preset: moonshot }\n", env)).provider.baseURL).toBe("https://api.moonshot.cn/v1");
    expect((await load("provider: { preset: openai }\n", env)).provider.baseURL).toBe("http://127.0.0.1:7000/v1");
    expect((await load("provider: { preset: openai }\n", {})).provider.baseURL).toBe("https://api.openai.com/v1");
  });

  it("reads anthropic's own variables and never the OpenAI ones", async () => {
    const openaiEnv = { OPENAI_API_KEY: "sk-openai", OPENAI_BASE_URL: "http://127.0.0.1:7000/v1" };
    const bare = await load("provider: { preset: anthropic }\n", openaiEnv);
    expect(bare.provider.apiKey).toBeUndefined();
    expect(bare.provider.baseURL).toBeUndefined();
    const own = await load("provider: { preset: anthropic }\n", {
      ...openaiEnv,
      ANTHROPIC_API_KEY: "sk-ant",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:7001",
    });
    expect(own.provider).toMatchObject({ apiKey: "sk-ant", baseURL: "http://127.0.0.1:7001" });
  });

  it("rejects a base URL from the environment that is not a URL", async () => {
    expect(await problems("", { OPENAI_BASE_URL: "localhost:8000" })).toEqual([
      'OPENAI_BASE_URL: expected an http(s) URL, got "localhost:8000"',
    ]);
  });

  it("needs a model for vllm and a base URL and model for custom", async () => {
    expect(await problems("provider:\n  preset: vllm\n")).toEqual([
      'countd.yaml:2:3: provider.model: required for preset "vllm" (or set COUNTD_MODEL)',
    ]);
    expect(await problems("provider:\n  preset: custom\n")).toEqual([
      'countd.yaml:2:3: provider.base_url: required for preset "custom"',
      'countd.yaml:2:3: provider.model: required for preset "custom" (or set COUNTD_MODEL)',
    ]);
  });

  it("loads without any API key, so commands that never call the LLM still work", async () => {
    const config = await load("provider: { preset: deepseek }\n");
    expect(config.provider.apiKey).toBeUndefined();
  });
});

describe("secrets", () => {
  it("collects the API key and the named variables' values, skipping unset and empty ones", async () => {
    const config = await load("secrets: [SMTP_PASSWORD, WEBHOOK_TOKEN, UNSET_ONE, EMPTY_ONE]\n", {
      OPENAI_API_KEY: "sk-live",
      SMTP_PASSWORD: "hunter2",
      WEBHOOK_TOKEN: "tok-123",
      EMPTY_ONE: "",
    });
    expect(config.secrets).toEqual(["sk-live", "hunter2", "tok-123"]);
  });
});

describe("tools", () => {
  it("reads the safety settings, resolving read-only roots against the config folder", async () => {
    const config = await load(
      [
        "tools:",
        "  restrict_to_workspace: ${RESTRICT}",
        "  read_only_roots: [./inbox, /srv/shared]",
        "  writable_skills: true",
        "  exec:",
        "    enabled: false",
        "    timeout: 2m",
        "    sandbox: bwrap",
        "    network: true",
        "    deny_patterns: ['curl .*\\|']",
        "    allow_list: [ls, cat, grep]",
        "    env: [GIT_AUTHOR_NAME]",
        "  web: { allow_hosts: [intranet.local, 10.1.2.3] }",
        "  spawn: { max_concurrent: 4, timeout: 5m }",
        "",
      ].join("\n"),
      { RESTRICT: "false" },
    );
    expect(config.tools).toEqual({
      restrictToWorkspace: false,
      readOnlyRoots: [path.join(dir, "inbox"), "/srv/shared"],
      writableSkills: true,
      exec: {
        enabled: false,
        timeoutMs: 120_000,
        sandbox: "bwrap",
        network: true,
        denyPatterns: ["curl .*\\|"],
        allowList: ["ls", "cat", "grep"],
        envNames: ["GIT_AUTHOR_NAME"],
      },
      web: { allowHosts: ["intranet.local", "10.1.2.3"] },
      spawn: { maxConcurrent: 4, timeoutMs: 300_000 },
    });
  });

  it("names a bad sandbox mode, a bad pattern and a secret passed to commands at their positions", async () => {
    expect(
      await problems(
        [
          "secrets: [SMTP_PASSWORD]",
          "tools:",
          "  exec:",
          "    sandbox: docker",
          '    deny_patterns: ["(unclosed"]',
          "    env: [LANGUAGE, SMTP_PASSWORD, OPENAI_API_KEY]",
          "",
        ].join("\n"),
      ),
    ).toEqual([
      'countd.yaml:4:14: tools.exec.sandbox: expected one of auto, bwrap, none, got "docker"',
      'countd.yaml:5:21: tools.exec.deny_patterns[0]: expected a regular expression, got "(unclosed"',
    ]);
    expect(await problems("secrets: [SMTP_PASSWORD]\ntools:\n  exec:\n    env: [LANGUAGE, SMTP_PASSWORD, OPENAI_API_KEY]\n")).toEqual([
      "countd.yaml:4:21: tools.exec.env[1]: SMTP_PASSWORD holds a secret, and secrets never reach tools",
      "countd.yaml:4:36: tools.exec.env[2]: OPENAI_API_KEY holds a secret, and secrets never reach tools",
    ]);
  });
});

describe("daemon settings", () => {
  it("reads the runner and heartbeat sections", async () => {
    const config = await load(
      [
        "jobs_dir: ./my-jobs",
        "runner: { concurrency: 4, shutdown_grace: 10s }",
        "heartbeat:",
        "  enabled: true",
        "  every: 15m",
        '  active_hours: "22:30-06:00"',
        "  timezone: Europe/Berlin",
        "  idle_threshold: 2h",
        "  max_per_day: 3",
        "  checklist: checks/HB.md",
        "  deliver: [{ email: { to: [me@example.com] } }]",
        "  provider: deepseek",
        "  model: deepseek-chat",
        "  budget: { per_day: 0.5, tokens_per_run: 20000 }",
        "",
      ].join("\n"),
    );
    expect(config.paths.jobs).toBe(path.join(dir, "my-jobs"));
    expect(config.runner).toEqual({ concurrency: 4, shutdownGraceMs: 10_000 });
    expect(config.heartbeat).toEqual({
      enabled: true,
      everyMs: 900_000,
      activeHours: { start: 22 * 60 + 30, end: 6 * 60 },
      timezone: "Europe/Berlin",
      idleThresholdMs: 7_200_000,
      maxPerDay: 3,
      checklist: path.join(dir, "workspace", "checks", "HB.md"),
      deliver: [{ kind: "email", to: ["me@example.com"], cc: [], bcc: [], attach: [] }],
      provider: "deepseek",
      model: "deepseek-chat",
      budget: { perDay: 0.5, tokensPerRun: 20_000 },
    });
  });

  it("reads the retention section, each period a duration, and names a bad one at file:line:col", async () => {
    const config = await load("retention:\n  sessions: 7d\n  tool_history: 2w\n  audit: 1y\n");
    expect(config.retention).toEqual({ sessionsMs: 7 * DAY_MS, toolHistoryMs: 14 * DAY_MS, auditMs: 365.25 * DAY_MS });
    expect(await problems("retention:\n  audit: forever\n  sessions: 0\n")).toEqual([
      'countd.yaml:2:10: retention.audit: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "forever"',
      'countd.yaml:3:13: retention.sessions: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got 0',
    ]);
  });

  it("keeps the ${VAR} references of heartbeat.deliver for send time, while the rest of the file is interpolated", async () => {
    const config = await load(
      [
        "timezone: ${TZ_NAME}",
        "heartbeat:",
        "  enabled: true",
        "  deliver:",
        "    - webhook:",
        "        url: ${SLACK_HOOK_URL}",
        "        format: slack",
        "    - email: { to: ['${OPS_EMAIL}'] }",
        "",
      ].join("\n"),
      { TZ_NAME: "Asia/Shanghai", SLACK_HOOK_URL: "https://hooks.slack.com/services/T0/B0/x", OPS_EMAIL: "ops@example.com" },
    );
    expect(config.timezone).toBe("Asia/Shanghai");
    expect(config.heartbeat.deliver).toEqual([
      { kind: "webhook", url: "${SLACK_HOOK_URL}", format: "slack", headers: {} },
      { kind: "email", to: ["${OPS_EMAIL}"], cc: [], bcc: [], attach: [] },
    ]);
  });

  it("names a bad target, an unset variable and a bad filled-in value in heartbeat.deliver at their positions", async () => {
    const lines = await problems(
      [
        "heartbeat:",
        "  deliver:",
        "    - email: { to: [ops@] }",
        "    - webhook: { url: '${SLACK_HOOK_URL}', format: slack }",
        "    - webhook: { url: https://a.example.com, secret: '${COUNTD_WEBHOOK_SECRET}' }",
        "",
      ].join("\n"),
      { COUNTD_WEBHOOK_SECRET: "hunter2-hunter2" },
    );
    expect(lines).toEqual([
      'countd.yaml:3:21: heartbeat.deliver[0].email.to[0]: expected an email address like "ops@example.com", got "ops@"',
    ]);
    expect(
      await problems(
        [
          "heartbeat:",
          "  deliver:",
          "    - webhook: { url: '${SLACK_HOOK_URL}', format: slack }",
          "    - webhook: { url: https://a.example.com, secret: '${COUNTD_WEBHOOK_SECRET}' }",
          "",
        ].join("\n"),
        { COUNTD_WEBHOOK_SECRET: "hunter2-hunter2" },
      ),
    ).toEqual([
      "countd.yaml:3:24: heartbeat.deliver[0].webhook.url: environment variable SLACK_HOOK_URL is not set",
      'countd.yaml:4:54: heartbeat.deliver[1].webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (filled in from COUNTD_WEBHOOK_SECRET; the value is not shown here)',
    ]);
  });

  it("reports problems of heartbeat.deliver together with the rest of the file's", async () => {
    expect(await problems("runner: { concurrency: 0 }\nheartbeat:\n  deliver: [{ webhook: { url: ftp://x.example.com } }]\n")).toEqual([
      "countd.yaml:1:24: runner.concurrency: expected a positive integer, got 0",
      'countd.yaml:3:31: heartbeat.deliver[0].webhook.url: expected an http(s) URL like "https://api.example.com/v1", got "ftp://x.example.com"',
    ]);
  });

  it("asks for a target when the heartbeat is enabled: at deliver: when written, else at heartbeat:", async () => {
    const message = "heartbeat.deliver: name at least one target: the heartbeat is enabled and its check-ins would go nowhere";
    expect(await problems("timezone: UTC\nheartbeat:\n  enabled: true\n")).toEqual([`countd.yaml:2:1: ${message}`]);
    expect(await problems("heartbeat:\n  enabled: true\n  deliver: []\n")).toEqual([`countd.yaml:3:3: ${message}`]);
    expect((await load("heartbeat:\n  deliver: []\n")).heartbeat.deliver).toEqual([]);
  });

  it("names a bad active_hours range at its position", async () => {
    expect(await problems('heartbeat:\n  active_hours: "8-21"\n')).toEqual([
      'countd.yaml:2:17: heartbeat.active_hours: expected a time range like "08:00-21:00", got "8-21"',
    ]);
  });
});

describe("smtp", () => {
  it("is absent by default and read with its password treated as a secret", async () => {
    expect((await load("")).smtp).toBeUndefined();
    const config = await load(
      "smtp:\n  host: mail.example.com\n  port: 465\n  secure: true\n  user: countd\n  password: ${SMTP_PASSWORD}\n  from: countd <countd@example.com>\n",
      { SMTP_PASSWORD: "s3cret-pw" },
    );
    expect(config.smtp).toEqual({
      host: "mail.example.com",
      port: 465,
      secure: true,
      user: "countd",
      password: "s3cret-pw",
      from: "countd <countd@example.com>",
    });
    expect(config.secrets).toContain("s3cret-pw");
  });

  it("needs a host and a sender", async () => {
    expect(await problems("smtp:\n  port: 25\n")).toEqual([
      "countd.yaml:2:3: smtp.host: expected a string, got nothing",
      "countd.yaml:2:3: smtp.from: expected a string, got nothing",
    ]);
  });
});

describe("what a command needs", () => {
  const SECRETS_FROM_ENV = [
    "provider:",
    "  api_key: ${OPENAI_API_KEY}",
    "smtp:",
    "  host: ${SMTP_HOST}",
    "  password: ${SMTP_PASSWORD}",
    "  from: countd@example.com",
    "heartbeat:",
    "  deliver: [{ webhook: { url: '${HEARTBEAT_HOOK}' } }]",
    "jobs_dir: ${JOBS_DIR:-./jobs}",
    "",
  ].join("\n");

  async function loadFor(needs: ConfigNeed[], text = SECRETS_FROM_ENV): Promise<Config> {
    await writeConfig(text);
    return loadConfig({ cwd: dir, env: {}, needs });
  }

  it("does not read the provider and smtp sections of a command that uses neither, when they refer to unset variables", async () => {
    const config = await loadFor([]);
    expect(config.provider.apiKey).toBeUndefined();
    expect(config.smtp).toBeUndefined();
    expect(config.paths.jobs).toBe(path.join(dir, "jobs"));
  });

  it("names the unset variables of the parts a command uses, and only those", async () => {
    const refusal = (needs: ConfigNeed[]) =>
      loadFor(needs).then(
        () => [],
        (err: ConfigError) => err.problems,
      );
    expect(await refusal(["provider"])).toEqual(["countd.yaml:2:12: provider.api_key: environment variable OPENAI_API_KEY is not set"]);
    expect(await refusal(["smtp"])).toEqual([
      "countd.yaml:4:9: smtp.host: environment variable SMTP_HOST is not set",
      "countd.yaml:5:13: smtp.password: environment variable SMTP_PASSWORD is not set",
    ]);
    expect(await refusal(["deliveries"])).toEqual([
      "countd.yaml:8:32: heartbeat.deliver[0].webhook.url: environment variable HEARTBEAT_HOOK is not set",
    ]);
  });

  it("still reports a malformed reference or a wrong value in a part the command does not use", async () => {
    await writeConfig(
      "provider:\n  api_key: ${OPENAI_API_KEY\n  temperature: 9\nheartbeat:\n  deliver: [{ webhook: { url: '${1HOOK}' } }]\n",
    );
    const err = (await loadConfig({ cwd: dir, env: {}, needs: [] }).catch((e: unknown) => e)) as ConfigError;
    expect(err.problems).toEqual([
      'countd.yaml:2:12: provider.api_key: unclosed variable reference "${OPENAI_API_KEY": missing "}"',
      "countd.yaml:3:16: provider.temperature: expected a number from 0 to 2, got 9",
      'countd.yaml:5:32: heartbeat.deliver[0].webhook.url: invalid variable reference "${1HOOK}": expected ${NAME} or ${NAME:-default}',
    ]);
  });
});
