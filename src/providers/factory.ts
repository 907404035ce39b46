import { ConfigError } from "../config/errors.js";
import type { ProviderConfig } from "../config/schema.js";
import { AnthropicProvider } from "./anthropic.js";
import { OpenAIProvider } from "./openai.js";
import { PRESETS } from "./presets.js";
import { withRetry } from "./retry.js";
import type { LLMProvider } from "./types.js";

// Local servers (ollama, vllm, most custom ones) ignore the key, but the OpenAI client insists on one.
const UNUSED_KEY = "unused";

/**
 * The API key the preset needs, or undefined for a preset that needs none. Kept apart from
 * loading so that commands which never call the LLM (validate) work without a key.
 */
export function requireApiKey(config: ProviderConfig): string | undefined {
  const preset = PRESETS[config.preset];
  if (config.apiKey || !preset.needsApiKey) return config.apiKey || undefined;
  throw new ConfigError([`no API key for provider "${config.preset}": set ${preset.apiKeyEnv[0]} (or provider.api_key in countd.yaml)`]);
}

/** The configured provider, wrapped in the single LLM retry layer. */
export function createProvider(config: ProviderConfig): LLMProvider {
  const apiKey = requireApiKey(config) ?? UNUSED_KEY;
  const { timeoutMs } = config;
  const provider =
    PRESETS[config.preset].protocol === "anthropic"
      ? new AnthropicProvider({ ...(config.baseURL !== undefined ? { baseURL: config.baseURL } : {}), apiKey, timeoutMs })
      : new OpenAIProvider({ name: config.preset, baseURL: requireBaseURL(config), apiKey, timeoutMs });
  return withRetry(provider, { attempts: config.attempts, baseDelayMs: 1000, maxDelayMs: 60_000 });
}

function requireBaseURL(config: ProviderConfig): string {
  if (config.baseURL) return config.baseURL;
  throw new ConfigError([`no base URL for provider "${config.preset}": set provider.base_url in countd.yaml`]);
}
