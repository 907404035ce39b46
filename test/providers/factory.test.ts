import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { LLMock } from "@copilotkit/aimock";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors.js";
import { loadConfig } from "../../src/config/load.js";
import type { ProviderConfig } from "../../src/config/schema.js";
import { LLMError } from "../../src/providers/errors.js";
import { createProvider, requireApiKey } from "../../src/providers/factory.js";
import type { LLMProvider } from "../../src/providers/types.js";

/** Answers only requests carrying one of these keys; anything else gets a 401. */
const KEYS = { deepseek: "sk-deepseek-test", anthropic: "sk-ant-test", openai: "sk-openai-test" };

let mock: LLMock;
let keyless: LLMock;
let dir: string;

beforeAll(async () => {
  mock = new LLMock({ port: 0, host: "127.0.0.1", auth: { apiKeys: Object.values(KEYS) } });
  keyless = new LLMock({ port: 0, host: "127.0.0.1" });
  for (const server of [mock, keyless]) {
    server.onMessage("ping", { content: "pong from the mock" });
    await server.start();
  }
});

afterAll(async () => {
  await Promise.all([mock.stop(), keyless.stop()]);
});

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "countd-factory-"));
  mock.clearRequests();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function providerConfig(yaml: string, env: NodeJS.ProcessEnv = {}): Promise<ProviderConfig> {
  await writeFile(path.join(dir, "countd.yaml"), yaml);
  return (await loadConfig({ cwd: dir, env })).provider;
}

async function ask(provider: LLMProvider, config: ProviderConfig): Promise<string> {
  let text = "";
  const options = { model: config.model, temperature: config.temperature, maxTokens: config.maxTokens };
  for await (const event of provider.chatStream([{ role: "user", content: "ping" }], [], options)) {
    if (event.type === "text") text += event.text;
  }
  return text;
}

describe("createProvider", () => {
  it("builds an OpenAI-compatible preset that talks to the configured base URL with the configured key", async () => {
    const config = await providerConfig(`provider:\n  preset: deepseek\n  base_url: ${mock.url}/v1\n`, {
      DEEPSEEK_API_KEY: KEYS.deepseek,
    });
    const provider = createProvider(config);
    expect(provider.name).toBe("deepseek");
    expect(await ask(provider, config)).toBe("pong from the mock");
    expect(mock.getRequests()).toMatchObject([
      { path: "/v1/chat/completions", body: { model: "deepseek-chat", max_tokens: 4096, temperature: 0.7 } },
    ]);
  });

  it("sends the configured key: the server turns away any other", async () => {
    const config = await providerConfig(`provider:\n  preset: deepseek\n  base_url: ${mock.url}/v1\n  api_key: sk-wrong\n`);
    const error = await ask(createProvider(config), config).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(LLMError);
    expect((error as LLMError).status).toBe(401);
  });

  it("builds anthropic against the configured base URL, with the configured timeout", async () => {
    const config = await providerConfig("provider:\n  preset: anthropic\n  model: claude-haiku-4-5\n  timeout: 2m\n", {
      ANTHROPIC_API_KEY: KEYS.anthropic,
      ANTHROPIC_BASE_URL: mock.url,
    });
    const provider = createProvider(config);
    expect(provider.name).toBe("anthropic");
    expect(await ask(provider, config)).toBe("pong from the mock");
    expect(mock.getRequests()).toMatchObject([
      { path: "/v1/messages", headers: { "x-stainless-timeout": "120" }, body: { model: "claude-haiku-4-5" } },
    ]);
  });

  it("talks to a local server that needs no key", async () => {
    const config = await providerConfig(`provider:\n  preset: ollama\n  base_url: ${keyless.url}/v1\n`);
    const provider = createProvider(config);
    expect(provider.name).toBe("ollama");
    expect(await ask(provider, config)).toBe("pong from the mock");
  });

  it("makes as many requests per call as provider.attempts allows", async () => {
    const config = await providerConfig(`provider:\n  preset: openai\n  base_url: ${mock.url}/v1\n  attempts: 1\n`, {
      OPENAI_API_KEY: KEYS.openai,
    });
    mock.nextRequestError(500, { message: "upstream down" });
    const error = await ask(createProvider(config), config).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(LLMError);
    expect((error as LLMError).status).toBe(500);
    expect(mock.getRequests()).toHaveLength(1);
  });
});

describe("a missing API key", () => {
  it("is one line naming the preset's variable", async () => {
    const config = await providerConfig("provider:\n  preset: deepseek\n", { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" });
    expect(() => createProvider(config)).toThrow(
      new ConfigError(['no API key for provider "deepseek": set DEEPSEEK_API_KEY (or provider.api_key in countd.yaml)']),
    );
  });

  it("names ANTHROPIC_API_KEY for anthropic and OPENAI_API_KEY for openai", async () => {
    const anthropic = await providerConfig("provider: { preset: anthropic }\n");
    expect(() => requireApiKey(anthropic)).toThrow(
      'no API key for provider "anthropic": set ANTHROPIC_API_KEY (or provider.api_key in countd.yaml)',
    );
    const openai = await providerConfig("provider: { preset: openai }\n");
    expect(() => requireApiKey(openai)).toThrow(
      'no API key for provider "openai": set OPENAI_API_KEY (or provider.api_key in countd.yaml)',
    );
  });

  it("is no problem for presets that need none", async () => {
    expect(requireApiKey(await providerConfig("provider: { preset: vllm, model: qwen2.5-7b }\n"))).toBeUndefined();
    expect(requireApiKey(await providerConfig("provider: { preset: zhipu }\n", { ZHIPUAI_API_KEY: "zk" }))).toBe("zk");
  });
});
