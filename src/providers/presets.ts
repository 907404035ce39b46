export const PRESET_NAMES = ["openai", "deepseek", "zhipu", "qwen", "moonshot", "ollama", "vllm", "custom", "anthropic"] as const;

export type PresetName = (typeof PRESET_NAMES)[number];

export interface Preset {
  /** Which wire protocol, hence which provider class. */
  protocol: "openai" | "anthropic";
  /** Undefined: the user must give one (custom), or the SDK's own default applies (anthropic). */
  baseURL?: string;
  /** Environment variables giving the base URL, in order of precedence. */
  baseURLEnv: readonly string[];
  /** Environment variables giving the API key, in order of precedence; the first is the one to name to the user. */
  apiKeyEnv: readonly string[];
  /** False for local servers that accept any key. */
  needsApiKey: boolean;
  /** Undefined: the user must name a model. */
  model?: string;
  /** Whether a typed answer is asked through the API's structured-output mode; false: by instruction in the prompt. */
  structuredOutput: boolean;
}

/**
 * structuredOutput: the servers documented to take `response_format: json_schema` (OpenAI, Ollama,
 * vLLM); the others accept at most `json_object` or nothing, and a custom server is unknown, so
 * their typed answers are asked by instruction.
 *
 * A hosted preset reads only its own key variable: an OPENAI_API_KEY or OPENAI_BASE_URL left in
 * the environment must never send one vendor's key to another vendor's host. OPENAI_* apply to
 * the openai and custom presets alone.
 */
const compatible = (
  baseURL: string | undefined,
  env: { key?: string; url?: string },
  needsApiKey: boolean,
  model: string | undefined,
  structuredOutput: boolean,
): Preset => ({
  protocol: "openai",
  baseURL,
  baseURLEnv: env.url ? [env.url] : [],
  apiKeyEnv: env.key ? [env.key] : [],
  needsApiKey,
  model,
  structuredOutput,
});

const OPENAI_ENV = { key: "OPENAI_API_KEY", url: "OPENAI_BASE_URL" };

export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  openai: compatible("https://api.openai.com/v1", OPENAI_ENV, true, "gpt-4o-mini", true),
  deepseek: compatible("https://api.deepseek.com/v1", { key: "DEEPSEEK_API_KEY" }, true, "deepseek-chat", false),
  zhipu: compatible("https://open.bigmodel.cn/api/paas/v4", { key: "ZHIPUAI_API_KEY" }, true, "glm-4.7-flash", false),
  qwen: compatible("https://dashscope.aliyuncs.com/compatible-mode/v1", { key: "DASHSCOPE_API_KEY" }, true, "qwen-plus", false),
  moonshot: compatible("https://api.moonshot.cn/v1", { key: "MOONSHOT_API_KEY" }, true, "kimi-k2-0905-preview", false),
  ollama: compatible("http://127.0.0.1:11434/v1", {}, false, "llama3.1", true),
  vllm: compatible("http://127.0.0.1:8000/v1", {}, false, undefined, true),
  custom: compatible(undefined, OPENAI_ENV, false, undefined, false),
  anthropic: {
    protocol: "anthropic",
    baseURLEnv: ["ANTHROPIC_BASE_URL"],
    apiKeyEnv: ["ANTHROPIC_API_KEY"],
    needsApiKey: true,
    model: "claude-sonnet-5",
    structuredOutput: true,
  },
};
