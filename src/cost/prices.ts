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
  /** What the table says of each model asked for; the table does not change while countd runs. */
  private readonly known = new Map<string, TablePrice>();

  constructor(private readonly overrides: Readonly<Record<string, Price>> = {}) {}

  /** USD for one call's usage, or null when the model has no price. */
  cost(ref: PriceRef, usage: Usage): number | null {
    const own = this.overrides[ref.model];
    if (own) return ownCost(own, usage);
    const key = `${ref.preset}\0${ref.baseURL ?? ""}\0${ref.model}`;
    let known = this.known.get(key);
    if (known === undefined) this.known.set(key, (known = tablePrice(ref)));
    if (known === "each call" || usage.cachedInputTokens + usage.cacheWriteTokens > usage.inputTokens) return tableCost(ref, usage);
    return known && known.perCall + ownCost(known, usage);
  }

  /** Whether calls to this model get a price (for `countd validate`). */
  priced(ref: PriceRef): boolean {
    return this.cost(ref, emptyUsage()) !== null;
  }
}

/**
 * A model's table price for countd's four usage figures: a fixed part per call (a price per
 * request) and a rate for each figure, or "each call" for a price that is not one rate (tiers by
 * prompt size, prices that change by date or time of day), or null when the model has none.
 * The table's calcPrice takes about 20 µs, and each LLM call is priced twice (its worst case held
 * against the budgets, then its usage): for a model with plain rates the rates are read once,
 * from the table's own answers for a million tokens of each kind.
 */
type TablePrice = (Price & { perCall: number }) | "each call" | null;

function tablePrice(ref: PriceRef): TablePrice {
  const at = (inputTokens: number, cachedInputTokens: number, cacheWriteTokens: number, outputTokens: number) =>
    tableCost(ref, { inputTokens, cachedInputTokens, cacheWriteTokens, outputTokens });
  const probe = prices().calcPrice({ input_tokens: 0 }, ref.model, lookup(ref));
  if (!probe) return null;
  const plain = !Array.isArray(probe.model.prices) && Object.values(probe.model_price).every((value) => typeof value !== "object");
  if (!plain) return "each call";
  const perCall = at(0, 0, 0, 0)!;
  return {
    perCall,
    input: at(PER_MILLION, 0, 0, 0)! - perCall,
    cachedInput: at(PER_MILLION, PER_MILLION, 0, 0)! - perCall,
    cacheWrite: at(PER_MILLION, 0, PER_MILLION, 0)! - perCall,
    output: at(0, 0, 0, PER_MILLION)! - perCall,
  };
}

function tableCost(ref: PriceRef, usage: Usage): number | null {
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
