import type { Hono } from "hono";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { zoneOf } from "../jobs/zones.js";
import type { Config } from "../config/schema.js";
import type { JobRegistry } from "../jobs/registry.js";
import { errorText } from "../text.js";
import { ApiError } from "./api-error.js";
import type { OutboxView, PurgeAnswer, ReleaseAnswer, RetryAnswer } from "./protocol.js";
import type { ConsoleEnv } from "./sign-in.js";
import { outboxItem } from "./views.js";

/** The outbox's routes: what is pending, held and dead, and the changes a person makes to it. */
export function outboxRoutes(
  app: Hono<ConsoleEnv>,
  deps: { outbox: DeliveryOutbox; config: () => Config; jobs: Pick<JobRegistry, "get"> },
  safe: <T>(value: T) => T,
): void {
  app.get("/api/outbox", async (c) => {
    const { pending, dead } = await deps.outbox.list();
    const shown = outboxItem(zoneOf(deps.config(), (name) => deps.jobs.get(name)));
    const disabled = await deps.outbox.disabledTargets();
    return c.json(safe<OutboxView>({ pending: pending.map(shown), dead: dead.map(shown), disabled_targets: disabled }));
  });
  // The id "dead" retries every dead delivery (delivery ids always hold dots).
  app.post("/api/outbox/:id/retry", async (c) => {
    const id = c.req.param("id");
    try {
      const count = await deps.outbox.retry(id);
      return c.json({ id, retried: count } satisfies RetryAnswer);
    } catch (err) {
      throw new ApiError(/acknowledged/.test(errorText(err)) ? 409 : 404, errorText(err));
    }
  });
  // A held delivery (on_verify_fail: hold) goes out once a person has looked at it.
  app.post("/api/outbox/:id/release", async (c) => {
    const id = c.req.param("id");
    try {
      await deps.outbox.release(id);
      return c.json({ id, released: true } satisfies ReleaseAnswer);
    } catch (err) {
      throw new ApiError(/acknowledged|not held/.test(errorText(err)) ? 409 : 404, errorText(err));
    }
  });
  app.post("/api/outbox/purge", async (c) => c.json({ purged: await deps.outbox.purge() } satisfies PurgeAnswer));
}
