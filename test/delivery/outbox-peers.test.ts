import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import { Outbox, type SendFn } from "../../src/delivery/outbox.js";
import { resolveTarget } from "../../src/delivery/secrets.js";
import { targetKey, type EmailTarget, type WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import { captureLog } from "../support/log-capture.js";
import { startSmtpPeer, type SmtpPeer, type SmtpStep } from "../support/smtp.js";
import { startWebhookReceiver, type ReceiverStep, type WebhookReceiver } from "../support/webhook-receiver.js";
import { completedMessage } from "../support/delivery-message.js";

/*
 * The outbox with the senders the daemon uses (sendEntry over createMailer and sendWebhook)
 * against real peers on loopback. The outbox's clock is moved by hand, so a 30 s backoff costs
 * nothing; the senders and peers run on real time.
 */

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const env = { HOOK_SECRET: SECRET };
const DAY = 24 * 3_600_000;
const WORKSPACE = "/srv/countd/workspace";

const message = completedMessage({
  job: "daily-report",
  runId: "20260302T080000Z-ab12",
  startedAt: "2026-03-02T07:59:00.000Z",
  result: "# Orders\n\nAll 3 shipped.",
});
const RUN_KEY = `daily-report.${message.run.id}`;

const mailTo: EmailTarget = {
  kind: "email",
  to: ["ops@example.com"],
  cc: [],
  bcc: [],
  attach: [],
  subject: "Report {{job.name}} {{status}}",
};
const hookAt = (url: string): WebhookTarget => ({ kind: "webhook", url, secret: "${HOOK_SECRET}", format: "json", headers: {} });

let dir: string;
let t: number;
const now = () => new Date(t);
let mailer: Mailer | undefined;
let smtp: SmtpPeer | undefined;
let receiver: WebhookReceiver | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-peers-"));
  t = Date.parse("2026-03-02T08:00:00.000Z");
});
afterEach(async () => {
  mailer?.close();
  mailer = undefined;
  await smtp?.close();
  smtp = undefined;
  await receiver?.close();
  receiver = undefined;
  await rm(dir, { recursive: true, force: true });
});

const open = (send: SendFn) => Outbox.open({ stateDir: dir, send, now, random: () => 0.5 });

async function smtpOutbox(...steps: SmtpStep[]): Promise<Outbox> {
  smtp = await startSmtpPeer({ steps });
  mailer = createMailer({
    smtp: { host: "127.0.0.1", port: smtp.port, secure: false, from: "countd <countd@example.com>" },
    stateDir: dir,
    timezone: "UTC",
  });
  return open(sendEntry(mailer, env));
}

async function webhookOutbox(...steps: ReceiverStep[]): Promise<Outbox> {
  receiver = await startWebhookReceiver({ secret: SECRET, steps });
  mailer = createMailer({ stateDir: dir, timezone: "UTC" });
  return open(sendEntry(mailer, env));
}

/** Moves the clock to the earliest pending delivery's next attempt and makes the attempts then due. */
async function nextAttempt(outbox: Outbox): Promise<void> {
  const due = outbox.list().pending.map((entry) => Date.parse(entry.nextAttemptAt));
  expect(due.length).toBeGreaterThan(0);
  t = Math.max(t, Math.min(...due));
  await outbox.runDue();
}

/** A day later, and once more from a reopened outbox: a delivered message must not go out again. */
async function laterAndAfterRestart(outbox: Outbox, send: SendFn): Promise<void> {
  t += 2 * DAY;
  await outbox.runDue();
  await outbox.stop();
  await (await open(send)).runDue();
}

describe("the outbox mailing a real SMTP server", () => {
  it("keeps trying a server that drops the connection, and delivers once when it accepts", async () => {
    const outbox = await smtpOutbox("refuse", "refuse");
    const [id] = await outbox.enqueue(RUN_KEY, [mailTo], message, WORKSPACE);

    await outbox.runDue();
    expect(outbox.list().pending).toEqual([
      expect.objectContaining({ id, attempts: 1, lastError: expect.stringContaining(`mail server 127.0.0.1:${smtp!.port}:`) }),
    ]);
    await nextAttempt(outbox);
    expect(outbox.list().pending).toEqual([expect.objectContaining({ id, attempts: 2 })]);
    await nextAttempt(outbox);

    expect(outbox.list()).toEqual({ pending: [], dead: [] });
    expect(outbox.deliveredAt(id!)).toEqual(now());
    await laterAndAfterRestart(outbox, sendEntry(mailer!, env));
    expect(smtp!.attempts).toEqual(["refuse", "refuse", "accept"]);
    expect(smtp!.received).toHaveLength(1);
    const { mail, envelope } = smtp!.received[0]!;
    expect(envelope.to).toEqual(["ops@example.com"]);
    expect(mail.messageId).toBe(`<${id}@countd>`);
    expect(mail.subject).toBe("Report daily-report ok");
    expect(mail.text).toContain("All 3 shipped.");
    expect(mail.html).toContain("<h1>Orders</h1>");
  });

  it("retries after 451 and delivers once on 250", async () => {
    const outbox = await smtpOutbox(451);
    const [id] = await outbox.enqueue(RUN_KEY, [mailTo], message, WORKSPACE);

    await outbox.runDue();
    expect(outbox.list().pending).toEqual([expect.objectContaining({ id, attempts: 1, lastError: expect.stringContaining("451") })]);
    await nextAttempt(outbox);

    expect(outbox.deliveredAt(id!)).toBeDefined();
    await laterAndAfterRestart(outbox, sendEntry(mailer!, env));
    expect(smtp!.attempts).toEqual([451, "accept"]);
    expect(smtp!.received.map((r) => r.mail.messageId)).toEqual([`<${id}@countd>`]);
  });

  it("marks a delivery refused with 550 dead with the server's reason, and does not try again", async () => {
    const outbox = await smtpOutbox(550);
    const [id] = await outbox.enqueue(RUN_KEY, [mailTo], message, WORKSPACE);

    await outbox.runDue();
    t += 2 * DAY;
    await outbox.runDue();

    expect(outbox.list()).toEqual({
      pending: [],
      dead: [
        expect.objectContaining({
          id,
          attempts: 1,
          lastError: expect.stringMatching(/^mail server 127\.0\.0\.1:\d+: .*550.*Mailbox unavailable/),
        }),
      ],
    });
    expect(smtp!.attempts).toEqual([550]);
    expect(smtp!.received).toEqual([]);
  });
});

describe("the outbox posting to a real webhook receiver", () => {
  const origin = () => new URL(receiver!.url).origin;

  it("retries 500, 500 and stops at 200: three signed attempts carrying one webhook-id", async () => {
    const outbox = await webhookOutbox(500, 500);
    const [id] = await outbox.enqueue(RUN_KEY, [hookAt(receiver!.url)], message, WORKSPACE);

    await outbox.runDue();
    expect(outbox.list().pending).toEqual([expect.objectContaining({ id, attempts: 1, lastError: `${origin()} answered HTTP 500` })]);
    // The secret is filled in when sending; on disk the target keeps the reference.
    expect(await readFile(join(dir, "outbox.jsonl"), "utf8")).not.toContain(SECRET);
    await nextAttempt(outbox);
    expect(outbox.list().pending).toEqual([expect.objectContaining({ id, attempts: 2 })]);
    await nextAttempt(outbox);

    expect(outbox.deliveredAt(id!)).toBeDefined();
    await laterAndAfterRestart(outbox, sendEntry(mailer!, env));
    expect(receiver!.requests.map((r) => [r.status, r.verified, r.headers["webhook-id"]])).toEqual([
      [500, true, id],
      [500, true, id],
      [200, true, id],
    ]);
    expect(receiver!.acknowledgedIds()).toEqual([id]);
    expect(JSON.parse(receiver!.requests[2]!.body)).toEqual({
      type: "run.completed",
      job: message.job,
      run: message.run,
      result: message.result,
    });
  });

  it("marks a delivery answered 400 dead with the receiver's reason, after one request", async () => {
    const outbox = await webhookOutbox({ status: 400, body: "unknown event type" });
    const [id] = await outbox.enqueue(RUN_KEY, [hookAt(receiver!.url)], message, WORKSPACE);

    await outbox.runDue();
    t += 2 * DAY;
    await outbox.runDue();

    expect(outbox.list()).toEqual({
      pending: [],
      dead: [expect.objectContaining({ id, attempts: 1, lastError: `${origin()} answered HTTP 400: unknown event type` })],
    });
    expect(receiver!.requests).toHaveLength(1);
  });

  it("on 410 marks the delivery dead and disables the target: a later delivery to it is dead without a request, other targets still get theirs", async () => {
    const outbox = await webhookOutbox(410);
    const gone = hookAt(receiver!.url);
    const other = hookAt(`${origin()}/other`);
    const [goneId] = await outbox.enqueue(RUN_KEY, [gone], message, WORKSPACE);
    await outbox.runDue();

    expect(outbox.disabledTargets()).toEqual([targetKey(gone)]);
    expect(outbox.list().dead).toEqual([
      expect.objectContaining({ id: goneId, lastError: expect.stringContaining(`${origin()} answered HTTP 410`) }),
    ]);

    t += 60_000;
    const [laterId, otherId] = await outbox.enqueue("daily-report.20260302T080100Z-cd34", [gone, other], message, WORKSPACE);
    await outbox.runDue();
    t += 2 * DAY;
    await outbox.runDue();

    expect(outbox.list().dead).toContainEqual(
      expect.objectContaining({ id: laterId, attempts: 0, lastError: "target disabled after HTTP 410" }),
    );
    expect(outbox.deliveredAt(otherId!)).toBeDefined();
    expect(receiver!.requests.map((r) => [r.url, r.status, r.headers["webhook-id"]])).toEqual([
      ["/hook", 410, goneId],
      ["/other", 200, otherId],
    ]);
  });

  it("a target disabled by 410 is enabled again by enableTargets (what SIGHUP calls), and that survives a restart", async () => {
    const outbox = await webhookOutbox(410);
    const gone = hookAt(receiver!.url);
    const [goneId] = await outbox.enqueue(RUN_KEY, [gone], message, WORKSPACE);
    await outbox.runDue();
    expect(outbox.disabledTargets()).toEqual([targetKey(gone)]);

    const { log, lines } = captureLog();
    const reopened = await Outbox.open({ stateDir: dir, send: sendEntry(mailer!, env), now, log });
    expect(await reopened.enableTargets("SIGHUP")).toEqual([targetKey(gone)]);
    expect(lines).toEqual([
      {
        level: "info",
        msg: "delivery target enabled again; its dead deliveries are sent again by `countd outbox retry`",
        fields: { component: "outbox", target: targetKey(gone), why: "SIGHUP" },
      },
    ]);
    expect(await reopened.enableTargets("SIGHUP")).toEqual([]);

    t += 60_000;
    const [laterId] = await reopened.enqueue("daily-report.20260302T080100Z-cd34", [gone], message, WORKSPACE);
    await reopened.runDue();
    expect(reopened.deliveredAt(laterId!)).toBeDefined();
    // The one that got the 410 stays dead until a retry.
    expect(reopened.list().dead.map((entry) => entry.id)).toEqual([goneId]);
    expect((await open(sendEntry(mailer!, env))).disabledTargets()).toEqual([]);
    expect(receiver!.requests.map((r) => [r.status, r.headers["webhook-id"]])).toEqual([
      [410, goneId],
      [200, laterId],
    ]);
  });

  it("a disabled target's URL changed in the job file is a new target: its deliveries are sent", async () => {
    const outbox = await webhookOutbox(410);
    const gone = hookAt(receiver!.url);
    await outbox.enqueue(RUN_KEY, [gone], message, WORKSPACE);
    await outbox.runDue();

    const moved = hookAt(`${origin()}/new-hook`);
    t += 60_000;
    const [movedId] = await outbox.enqueue("daily-report.20260302T080100Z-cd34", [moved], message, WORKSPACE);
    await outbox.runDue();
    expect(outbox.deliveredAt(movedId!)).toBeDefined();
    expect(receiver!.requests.map((r) => [r.url, r.status])).toEqual([
      ["/hook", 410],
      ["/new-hook", 200],
    ]);
  });

  it("times out on a receiver that never answers and retries with the same webhook-id", async () => {
    // sendEntry always waits the full 15 s; the hang is tested through the same resolveTarget and
    // sendWebhook with a short timeout instead.
    receiver = await startWebhookReceiver({ secret: SECRET, steps: ["hang"] });
    const impatient: SendFn = async (entry) => {
      const target = resolveTarget(entry.target, env);
      if (target.kind !== "webhook") throw new Error(`expected a webhook delivery, got ${entry.id}`);
      await sendWebhook(target, entry.message, entry.id, { timeoutMs: 300 });
    };
    const outbox = await open(impatient);
    const [id] = await outbox.enqueue(RUN_KEY, [hookAt(receiver.url)], message, WORKSPACE);

    await outbox.runDue();
    expect(outbox.list().pending).toEqual([
      expect.objectContaining({ id, attempts: 1, lastError: `no answer from ${origin()} within 300 ms` }),
    ]);
    await nextAttempt(outbox);

    expect(outbox.deliveredAt(id!)).toBeDefined();
    await laterAndAfterRestart(outbox, impatient);
    expect(receiver.requests.map((r) => [r.status, r.headers["webhook-id"]])).toEqual([
      [undefined, id],
      [200, id],
    ]);
    expect(receiver.acknowledgedIds()).toEqual([id]);
  });
});
