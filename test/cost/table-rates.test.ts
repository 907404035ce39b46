import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { Pricer, type PriceRef } from "../../src/cost/prices.js";
import type { Usage } from "../../src/providers/types.js";

const table = createRequire(import.meta.url)("@pydantic/genai-prices") as typeof import("@pydantic/genai-prices");

const usages: Usage[] = [
  { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 },
  { inputTokens: 1_234, outputTokens: 56, cachedInputTokens: 0, cacheWriteTokens: 0 },
  { inputTokens: 9_000, outputTokens: 700, cachedInputTokens: 4_000, cacheWriteTokens: 1_500 },
  // Past the 200k-token tier of the models that have one.
  { inputTokens: 250_000, outputTokens: 4_096, cachedInputTokens: 100_000, cacheWriteTokens: 20_000 },
];

describe("a call priced from the bundled table", () => {
  it("costs what the table's own calcPrice says: plain rates, tiers by prompt size, prices that change by date", () => {
    const pricer = new Pricer();
    const refs: PriceRef[] = [
      { preset: "openai", model: "gpt-4o-mini" },
      { preset: "anthropic", model: "claude-sonnet-4-20250514" },
      { preset: "anthropic", model: "claude-sonnet-4-5" },
      { preset: "anthropic", model: "claude-opus-4-6" },
      { preset: "openai", model: "gpt-5.6-luna" },
      { preset: "custom", baseURL: "https://generativelanguage.googleapis.com/v1beta/openai", model: "gemini-2.5-pro" },
      { preset: "custom", baseURL: "https://openrouter.ai/api/v1", model: "openai/gpt-4o-mini" },
    ];
    for (const ref of refs) {
      for (const usage of [...usages, ...usages]) {
        const options = ref.baseURL && ref.preset === "custom" ? { providerApiUrl: ref.baseURL } : { providerId: ref.preset };
        const expected = table.calcPrice(
          {
            input_tokens: usage.inputTokens,
            cache_read_tokens: usage.cachedInputTokens,
            cache_write_tokens: usage.cacheWriteTokens,
            output_tokens: usage.outputTokens,
          },
          ref.model,
          options,
        );
        expect(expected, `${ref.model} is in the table`).not.toBeNull();
        expect(pricer.cost(ref, usage), `${ref.model} ${JSON.stringify(usage)}`).toBeCloseTo(expected!.total_price, 12);
      }
    }
    expect(pricer.cost({ preset: "openai", model: "countd-unlisted-model" }, usages[1]!)).toBeNull();
    expect(pricer.cost({ preset: "openai", model: "countd-unlisted-model" }, usages[1]!)).toBeNull();
  });
});
