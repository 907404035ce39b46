import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Redactor } from "../../src/audit/redact.js";
import { RunDispatcher, sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import type { ApprovalRequest } from "../../src/delivery/message.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { redactedSend } from "../../src/delivery/redacted-send.js";
import type { DeliveryTarget } from "../../src/delivery/targets.js";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The request a person gets when a tool call waits for approval: queued by the dispatcher the
 * daemon uses, through its outbox and redaction, to a real SMTP server and a real webhook receiver.
 */

const SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c";
/** Longer than any excerpt: it must arrive whole in the mail and the json body. */
const LONG = "x".repeat(5000);
const ASKED = "2026-03-02T08:00:00.000Z";
const EXPIRES = "2026-03-02T12:00:00.000Z";

let dir: string;
let peer: SmtpPeer;
let receiver: WebhookReceiver;
let mailer: Mailer;
let outbox: Outbox;
let dispatcher: RunDispatcher;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-approval-request-"));
  peer = await startSmtpPeer();
  receiver = await startWebhookReceiver();
  mailer = createMailer({
    smtp: { host: "127.0.0.1", port: peer.port, secure: false, from: "countd <countd@example.com>" },
    stateDir: dir,
    timezone: "UTC",
  });
  await open();
});
afterEach(async () => {
  await outbox.stop();
  mailer.close();
  await peer.close();
  await receiver.close();
  await rm(dir, { recursive: true, force: true });
});

/** The outbox and dispatcher as a daemon start opens them from `dir`, redacting SECRET. */
async function open(): Promise<void> {
  const redactor = () => new Redactor([SECRET]);
  outbox = await Outbox.open({ stateDir: dir, send: redactedSend(sendEntry(mailer, {}), redactor) });
  dispatcher = new RunDispatcher(outbox, () => join(dir, "workspace"), undefined, undefined, undefined, redactor);
}

const email: DeliveryTarget = { kind: "email", to: ["me@example.com"], cc: [], bcc: [], attach: [] };
const hook = (path: string, format: "json" | "slack" | "output"): DeliveryTarget => ({
  kind: "webhook",
  url: `${receiver.url}/${path}`,
  format,
  headers: {},
});

const job = (): Job => ({
  name: "release",
  file: join(dir, "release.yaml"),
  timezone: "UTC",
  prompt: "publish the release",
  ...jobDefaults(),
  schedule: { kind: "every", intervalMs: 60_000 },
  deliver: [hook("answers", "json")],
  onFailure: [hook("alerts", "json")],
});

const run: RunRecord = {
  id: "20260302T075500Z-ab12",
  job: "release",
  reason: "schedule",
  scheduledAt: "2026-03-02T07:55:00.000Z",
  startedAt: "2026-03-02T07:55:00.000Z",
  status: "waiting",
  iterations: 3,
  toolCalls: 2,
  usage: emptyUsage(),
  sessionId: "cron:release:20260302T075500Z-ab12",
};

const approval: Omit<ApprovalRequest, "links"> = {
  id: "Qm9vLWFwcHJvdmFsLWlk",
  tool: "exec",
  arguments: { command: `git push origin main --push-option=${LONG}`, env: { TOKEN: SECRET } },
  rule: 'exec: "git push *"',
  reasoning: "The release notes are committed; pushing main so the tag build starts.",
  askedAt: ASKED,
  expiresAt: EXPIRES,
  onTimeout: "deny",
};

const links = {
  approve: "http://127.0.0.1:8080/approval/Qm9vLWFwcHJvdmFsLWlk?answer=approve&token=YXBwcm92ZQ.c2lnbmVk",
  deny: "http://127.0.0.1:8080/approval/Qm9vLWFwcHJvdmFsLWlk?answer=deny&token=ZGVueQ.c2lnbmVk",
};

/** Asks `targets` and waits until the outbox sent everything due. */
async function ask(targets: DeliveryTarget[], withLinks: ApprovalRequest["links"] = links) {
  const queued = await dispatcher.ask(job(), run, approval, withLinks, targets);
  await outbox.runDue();
  return queued;
}

describe("the approval request mail", () => {
  it("says it is a request and carries the tool, the complete arguments, the rule, both links, the CLI lines and the expiry", async () => {
    await ask([email]);
    await peer.waitFor(1);
    const { mail } = peer.received[0]!;
    expect(mail.subject).toBe("Approval needed: release wants to run exec");
    const text = mail.text ?? "";
    expect(text).toContain("**Job release wants to run `exec`** and waits for your answer");
    expect(text).toContain(run.id);
    expect(text).toContain(`"command": "git push origin main --push-option=${LONG}"`);
    expect(text).toContain('exec: "git push *"');
    expect(text).toContain("pushing main so the tag build starts");
    expect(text).toContain("Expires 2026-03-02 12:00:00 +00:00 (4h 0m after it was asked)");
    expect(text).toContain("If nobody answers by then, the call is denied and the run goes on without it.");
    expect(text).toContain(`countd approve ${approval.id}\ncountd deny ${approval.id}`);
    const html = String(mail.html);
    expect(html).toContain(`<a href="${links.approve.replace(/&/g, "&amp;")}">Approve</a>`);
    expect(html).toContain(`<a href="${links.deny.replace(/&/g, "&amp;")}">Deny</a>`);
  });

  it("is redacted like every message: a secret in the arguments arrives as [REDACTED]", async () => {
    await ask([email, hook("json", "json")]);
    await peer.waitFor(1);
    await receiver.waitFor(1);
    expect(peer.received[0]!.raw.toString("utf8")).not.toContain(SECRET);
    expect(peer.received[0]!.mail.text).toContain('"TOKEN": "[REDACTED]"');
    expect(receiver.requests[0]!.body).not.toContain(SECRET);
    expect(JSON.parse(receiver.requests[0]!.body).approval.arguments.env).toEqual({ TOKEN: "[REDACTED]" });
  });

  it("without a console, has no links and still tells how to answer from the CLI; on_timeout fail says the run fails", async () => {
    await dispatcher.ask(job(), run, { ...approval, onTimeout: "fail" }, undefined, [email]);
    await outbox.runDue();
    await peer.waitFor(1);
    const { mail } = peer.received[0]!;
    expect(String(mail.html)).not.toContain("Approve</a>");
    expect(mail.text).toContain("If nobody answers by then, the run fails.");
    expect(mail.text).toContain(`countd approve ${approval.id}`);
  });
});

describe("the approval request over webhooks", () => {
  it("json (and output, which has no answer to send) carry type, the approval and its signed answer URLs", async () => {
    await ask([hook("json", "json"), hook("output", "output")]);
    await receiver.waitFor(2);
    for (const request of receiver.requests) {
      const body = JSON.parse(request.body);
      expect(body.type).toBe("approval.requested");
      expect(body.job).toBe("release");
      expect(body.run).toMatchObject({ id: run.id, status: "waiting" });
      expect(body.approval).toEqual({
        id: approval.id,
        tool: "exec",
        arguments: { command: `git push origin main --push-option=${LONG}`, env: { TOKEN: "[REDACTED]" } },
        rule: 'exec: "git push *"',
        reasoning: approval.reasoning,
        asked_at: ASKED,
        expires_at: EXPIRES,
        on_timeout: "deny",
        approve_url: links.approve,
        deny_url: links.deny,
      });
    }
  });

  it("slack gets a short text with both links", async () => {
    await ask([hook("slack", "slack")]);
    await receiver.waitFor(1);
    const text: string = JSON.parse(receiver.requests[0]!.body).text;
    expect(text.startsWith("*Approval needed: release wants to run exec*")).toBe(true);
    expect(text).toContain(`<${links.approve}|Approve>`);
    expect(text).toContain(`<${links.deny}|Deny>`);
    expect(text).toContain(`countd approve ${approval.id}`);
    expect(text).not.toContain(LONG);
    expect(text.length).toBeLessThan(3000);
  });
});

describe("queueing", () => {
  it("a waiting run's end is no failure: finished() queues nothing", async () => {
    const dispatched = await dispatcher.finished(job(), run, { answer: "" }, false);
    expect(dispatched.queued).toEqual([]);
    expect(outbox.list()).toEqual({ pending: [], dead: [] });
  });

  it("asking again with the same approval, even after a restart, queues one delivery per target", async () => {
    const targets = [email, hook("json", "json")];
    const first = await dispatcher.ask(job(), run, approval, links, targets);
    await outbox.stop();
    await open();
    // The queued request is read back after the restart, links and all, not set aside as unreadable.
    expect(outbox.list().pending.map((entry) => [entry.id, entry.message.kind, entry.message.approval?.links])).toEqual(
      first[0]!.ids.map((id) => [id, "approval.requested", links]),
    );
    const again = await ask(targets);
    await peer.waitFor(1);
    await receiver.waitFor(1);
    expect(again[0]!.ids).toEqual(first[0]!.ids);
    expect(first[0]!.ids).toEqual([
      expect.stringMatching(new RegExp(`^release\\.${run.id}\\.approval\\.${approval.id}\\.email-`)),
      expect.stringMatching(new RegExp(`^release\\.${run.id}\\.approval\\.${approval.id}\\.webhook-`)),
    ]);
    // A third ask once both were delivered sends nothing either.
    await ask(targets);
    expect(peer.received).toHaveLength(1);
    expect(receiver.acknowledgedIds()).toEqual([first[0]!.ids[1]]);
  });
});
