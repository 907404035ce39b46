import type { LLMProvider } from "../providers/types.js";
import type { RunSpend } from "./budget.js";
import type { Pricer, PriceRef } from "./prices.js";

/**
 * The provider with every call priced: its usage event carries the call's cost, and the run's
 * spending (when given) counts it. Budgets are checked by the loop before each call, not here:
 * a call not made must not look like a failed one in the audit log.
 */
export function metered(provider: LLMProvider, pricer: Pricer, ref: Omit<PriceRef, "model">, spend?: RunSpend): LLMProvider {
  return {
    name: provider.name,
    async *chatStream(messages, tools, options) {
      for await (const event of provider.chatStream(messages, tools, options)) {
        if (event.type !== "usage") {
          yield event;
          continue;
        }
        const cost = pricer.cost({ ...ref, model: options.model }, event.usage);
        spend?.add(options.model, event.usage, cost);
        yield { ...event, cost };
      }
    },
  };
}
