import type { LLMProvider } from "../providers/types.js";
import type { PriceOf, RunSpend } from "./budget.js";
import { estimatedUsage, requestTokens, ResponseSize } from "./estimate.js";
import type { Pricer, PriceRef } from "./prices.js";

/** How calls through one provider endpoint are priced. */
export const priceOf =
  (pricer: Pricer, ref: Omit<PriceRef, "model">): PriceOf =>
  (model, usage) =>
    pricer.cost({ ...ref, model }, usage);

/**
 * The provider with every call priced: its usage event carries the call's cost, and the run's
 * spending (when given) counts it. A call whose provider reports no usage (a gateway that ignores
 * stream_options.include_usage) is counted all the same, its tokens estimated from the request
 * and the response (cost/estimate.ts) and marked so: it must not pass the budgets as free. A call
 * that fails after it streamed output is counted the same way; one that fails before any is not.
 *
 * Budgets are checked by the loop before each call, not here: a call not made must not look like
 * a failed one in the audit log. Here the call's hold on the caps ends once its usage is counted.
 */
export function metered(provider: LLMProvider, price: PriceOf, spend?: RunSpend): LLMProvider {
  return {
    name: provider.name,
    async *chatStream(messages, tools, options) {
      const hold = spend?.claim(price, { messages, tools, model: options.model, maxTokens: options.maxTokens });
      const response = new ResponseSize();
      const estimate = () => estimatedUsage(requestTokens(messages, tools), response.tokens);
      let reported = false;
      let ended = false;
      try {
        for await (const event of provider.chatStream(messages, tools, options)) {
          response.add(event);
          if (event.type !== "usage") {
            yield event;
            continue;
          }
          reported = true;
          const cost = price(options.model, event.usage);
          spend?.add(options.model, event.usage, cost);
          hold?.release();
          yield { ...event, cost };
        }
        ended = true;
        if (!reported) {
          const usage = estimate();
          const cost = price(options.model, usage);
          spend?.add(options.model, usage, cost);
          yield { type: "usage", usage, cost };
        }
      } finally {
        if (!reported && !ended && response.tokens > 0) {
          const usage = estimate();
          spend?.add(options.model, usage, price(options.model, usage));
        }
        hold?.release();
      }
    },
  };
}
