import type { Hono } from "hono";
import type { WebhookTrigger } from "../triggers/webhook.js";

/**
 * POST /hooks/<job>: the one endpoint that takes no console token, since the request's Standard
 * Webhooks signature is its credential; the trigger decides, this only carries the request over.
 */
export function mountHooks<E extends object>(app: Hono<E & { Bindings: object }>, hooks: WebhookTrigger): void {
  app.post("/hooks/:job", async (c) => {
    const answer = await hooks.handle({ job: c.req.param("job"), headers: c.req.raw.headers, body: c.req.raw.body });
    for (const [name, value] of Object.entries(answer.headers ?? {})) c.header(name, value);
    c.header("Cache-Control", "no-store");
    return c.json(answer.body, answer.status);
  });
}
