import { hostname } from "node:os";
import { emptyUsage } from "../providers/types.js";
import { errorText } from "../text.js";
import type { Mailer } from "./email.js";
import { DeliveryError } from "./errors.js";
import type { DeliveryMessage } from "./message.js";
import { deliveryId } from "./outbox.js";
import { resolveTarget } from "./secrets.js";
import type { DeliveryTarget } from "./targets.js";
import { sendWebhook } from "./webhook.js";

/*
 * What `countd test-delivery` sends: a message of kind `test` that no reader can take for a run's
 * (its own subject, its own webhook type, a body saying no run happened), sent straight to the
 * target by the senders the outbox uses, so it goes the way a report would.
 */

const TEST_SUBJECT = "[countd test] {{job.name}}";

/** The test message for `job`, made at `at`; its run id is only a name for the test. */
export function testMessage(job: string, at: Date): DeliveryMessage {
  const iso = at.toISOString();
  return {
    kind: "test",
    job,
    run: {
      id: `test-${iso.replace(/[-:]|\.\d+/g, "")}`,
      reason: "manual",
      status: "ok",
      startedAt: iso,
      finishedAt: iso,
      durationMs: 0,
      usage: emptyUsage(),
      cost: null,
    },
    result: [
      `This is a test message from countd for the job ${job}, sent by \`countd test-delivery ${job}\` on ${hostname()}.`,
      `No run happened: it only shows that what ${job} sends reaches this place.`,
    ].join("\n\n"),
  };
}

export type TestOutcome = { ok: true; detail: string } | { ok: false; reason: string };

/**
 * Sends `message` to `target` once, now, its `${VAR}` references filled in from `env`. A mail
 * carries the test subject, without the target's attachments and usage footer: the test is of
 * the way there, not of a report's content.
 */
export async function sendTest(
  target: DeliveryTarget,
  message: DeliveryMessage,
  opts: { mailer: Mailer; env: NodeJS.ProcessEnv; workspace: string },
): Promise<TestOutcome> {
  const id = deliveryId(`${message.job}.${message.run.id}`, target);
  try {
    const resolved = resolveTarget(target, opts.env);
    if (resolved.kind === "webhook") return { ok: true, detail: `HTTP ${(await sendWebhook(resolved, message, id)).status}` };
    const mail = { ...resolved, subject: TEST_SUBJECT, attach: [], footer: undefined };
    const { info } = await opts.mailer.send(mail, message, id, opts.workspace);
    return { ok: true, detail: opts.mailer.usesFiles ? `written to ${info}` : info };
  } catch (err) {
    return { ok: false, reason: err instanceof DeliveryError ? err.message : errorText(err) };
  }
}
