import { createRequire } from "node:module";
import type { PresetName } from "../providers/presets.js";
import { emptyUsage, type Usage } from "../providers/types.js";

/** USD per million tokens, as countd.yaml's `prices:` gives them. */
export interface Price {
  input: number;
  /** Input read from the prompt cache; the input price when not given. */
  cachedInput: number;
  /** Input written to the prompt cache; the input price when not given. */
  cacheWrite: number;
  output: number;
}

/** Which model a call went to, and through which provider: what a price is looked up by. */
export interface PriceRef {
  preset: PresetName;
  /** The provider's endpoint: a custom preset's host may be a priced provider (OpenRouter, …). */
  baseURL?: string;
  model: string;
}

type GenaiPrices = typeof import("@pydantic/genai-prices");

/** The table's own provider ids for the presets that are one vendor's API; the others are matched by their URL. */
const PROVIDER_IDS: Partial<Record<PresetName, string>> = {
  openai: "openai",
  anthropic: "anthropic",
  deepseek: "deepseek",
  moonshot: "moonshotai",
};

const PER_MILLION = 1_000_000;

let table: GenaiPrices | undefined;

/**
 * Loaded on the first price asked for, not at start-up: the table is 0.8 MB of code, and a daemon
 * whose jobs do not run yet has no call to price.
 */
function prices(): GenaiPrices {
  return (table ??= createRequire(import.meta.url)("@pydantic/genai-prices") as GenaiPrices);
}

/**
 * Prices LLM calls: countd.yaml's `prices:` first (by model name), then the price table of
 * `@pydantic/genai-prices` bundled with countd (it works offline and is never updated at run
 * time: a newer table comes with a newer countd). A model in neither is unpriced: its cost is
 * null, never 0.
 */
export class Pricer {
  constructor(private readonly overrides: Readonly<Record<string, Price>> = {}) {}

  /** USD for one call's usage, or null when the model has no price. */
  cost(ref: PriceRef, usage: Usage): number | null {
    const own = this.overrides[ref.model];
    if (own) return ownCost(own, usage);
    const result = prices().calcPrice(
      {
        input_tokens: usage.inputTokens,
        cache_read_tokens: usage.cachedInputTokens,
        cache_write_tokens: usage.cacheWriteTokens,
        output_tokens: usage.outputTokens,
      },
      ref.model,
      lookup(ref),
    );
    return result ? result.total_price : null;
  }

  /** Whether calls to this model get a price (for `countd validate`). */
  priced(ref: PriceRef): boolean {
    return this.cost(ref, emptyUsage()) !== null;
  }
}

function lookup(ref: PriceRef): { providerId: string } | { providerApiUrl: string } | undefined {
  const providerId = PROVIDER_IDS[ref.preset];
  if (providerId) return { providerId };
  // A local server (ollama, vllm, a custom one on this machine) matches no provider's URL, and a
  // model name alone could match some hosted vendor's price for the same open model: not this one.
  return ref.baseURL ? { providerApiUrl: ref.baseURL } : undefined;
}

/** (input − cached − cache writes) × input + cached × cached_input + cache writes × cache_write + output × output. */
function ownCost(price: Price, usage: Usage): number {
  const uncached = Math.max(0, usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens);
  return (
    (uncached * price.input +
      usage.cachedInputTokens * price.cachedInput +
      usage.cacheWriteTokens * price.cacheWrite +
      usage.outputTokens * price.output) /
    PER_MILLION
  );
}
