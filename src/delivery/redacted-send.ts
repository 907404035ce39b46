import type { Redactor } from "../audit/redact.js";
import { errorText } from "../text.js";
import type { SendFn } from "./delivery-outbox.js";
import { DeliveryError } from "./errors.js";

/**
 * A sender whose failures are redacted before the outbox records them (outbox.jsonl, a shared
 * queue, `countd outbox`, the log): a mail server or a chat service may quote a password or token
 * back in its refusal. A DeliveryError keeps the fields the outbox decides by.
 */
export function redactedSend(send: SendFn, redactor: () => Redactor): SendFn {
  return async (entry) => {
    try {
      await send(entry);
    } catch (err) {
      const text = errorText(err);
      const safe = redactor().redact(text);
      if (safe === text) throw err;
      if (!(err instanceof DeliveryError)) throw new Error(safe);
      const { permanent, status, responseCode, retryAfterMs, disableTarget } = err;
      throw new DeliveryError(safe, { permanent, status, responseCode, retryAfterMs, disableTarget });
    }
  };
}
