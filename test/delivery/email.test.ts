import { deliveryFailure as failure } from "../support/delivery-error.js";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { simpleParser } from "mailparser";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SmtpConfig } from "../../src/config/schema.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import type { EmailTarget } from "../../src/delivery/targets.js";
import { captureLog } from "../support/log-capture.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { listenLoopback } from "../support/loopback.js";
import { completedMessage } from "../support/delivery-message.js";

const DELIVERY_ID = "daily-report.20260301T233000Z-ab12.email-0123456789ab";

const message = completedMessage({
  job: "daily-report",
  runId: "20260301T233000Z-ab12",
  startedAt: "2026-03-01T23:30:00.000Z",
  result: "# Sales\n\n| region | total |\n|---|---|\n| north | 12 |\n\nAll good <script>alert(1)</script>",
});

const target = (extra: Partial<EmailTarget> = {}): EmailTarget => ({
  kind: "email",
  to: ["ops@example.com"],
  cc: [],
  bcc: [],
  attach: [],
  ...extra,
});

let dir: string;
let workspace: string;
let stateDir: string;
let peer: SmtpPeer | undefined;
let mailer: Mailer | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-email-"));
  workspace = join(dir, "workspace");
  stateDir = join(dir, "state");
  await mkdir(join(workspace, "reports"), { recursive: true });
});
afterEach(async () => {
  mailer?.close();
  mailer = undefined;
  await peer?.close();
  peer = undefined;
  await rm(dir, { recursive: true, force: true });
});

const smtpFor = (port: number, extra: Partial<SmtpConfig> = {}): SmtpConfig => ({
  host: "127.0.0.1",
  port,
  secure: false,
  from: "countd <countd@example.com>",
  ...extra,
});

async function smtpMailer(opts: Parameters<typeof startSmtpPeer>[0] = {}, smtp: Partial<SmtpConfig> = {}): Promise<Mailer> {
  peer = await startSmtpPeer(opts);
  mailer = createMailer({ smtp: smtpFor(peer.port, smtp), stateDir, timezone: "Asia/Shanghai" });
  return mailer;
}

describe("email over SMTP", () => {
  it("sends the answer as sanitised HTML with a text part, the rendered subject, headers, Message-ID and attachments", async () => {
    await writeFile(join(workspace, "reports", "north.csv"), "region,total\nnorth,12\n");
    await writeFile(join(workspace, "reports", "south.csv"), "region,total\nsouth,7\n");
    await writeFile(join(workspace, "reports", "notes.txt"), "not attached");
    const sender = await smtpMailer();
    const { info } = await sender.send(
      target({
        cc: ["lead@example.com"],
        bcc: ["audit@example.com"],
        subject: "Daily report {{date}} {{time}} ({{status}})",
        attach: ["reports/*.csv"],
      }),
      message,
      DELIVERY_ID,
      workspace,
    );
    expect(info).toMatch(/^250 .*\(accepted: ops@example\.com, lead@example\.com, audit@example\.com\)$/);
    const [received] = peer!.received;
    expect(received!.envelope).toEqual({ from: "countd@example.com", to: ["ops@example.com", "lead@example.com", "audit@example.com"] });
    const { mail } = received!;
    expect(mail.subject).toBe("Daily report 2026-03-02 07:30 (ok)");
    expect(mail.messageId).toBe(`<${DELIVERY_ID}@countd>`);
    expect(mail.headers.get("x-countd-job")).toBe("daily-report");
    expect(mail.headers.get("x-countd-run")).toBe("20260301T233000Z-ab12");
    expect(mail.html).toMatch(/<table>[\s\S]*<td>north<\/td>/);
    expect(mail.html).not.toMatch(/<script|alert/);
    expect(mail.text).toContain("north");
    expect(mail.text).not.toContain("<script");
    expect(mail.headers.has("bcc")).toBe(false);
    expect(mail.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([
      ["north.csv", "region,total\nnorth,12\n"],
      ["south.csv", "region,total\nsouth,7\n"],
    ]);
  });

  it("uses the default subject, and tells the reader when an attachment pattern matched nothing", async () => {
    const sender = await smtpMailer();
    await sender.send(target({ attach: ["reports/*.pdf"] }), message, DELIVERY_ID, workspace);
    const { mail } = peer!.received[0]!;
    expect(mail.subject).toBe("[countd] daily-report ok 2026-03-02");
    expect(mail.attachments).toEqual([]);
    expect(mail.text).toContain("No file in the workspace matched the attachment pattern_ `reports/*.pdf`");
    expect(mail.html).toContain("<code>reports/*.pdf</code>");
  });

  it("ends the mail with the run's tokens, cost and duration under footer: usage, in text and HTML; without it, no footer", async () => {
    const sender = await smtpMailer();
    const used = {
      ...message,
      run: {
        ...message.run,
        usage: { inputTokens: 12_000, cachedInputTokens: 8_000, cacheWriteTokens: 0, outputTokens: 900 },
        cost: 0.0042,
        durationMs: 83_000,
      },
    };
    await sender.send(target({ footer: "usage" }), used, DELIVERY_ID, workspace);
    await sender.send(target(), used, `${DELIVERY_ID}-plain`, workspace);
    await sender.send(target({ footer: "usage" }), { ...used, run: { ...used.run, cost: null } }, `${DELIVERY_ID}-unpriced`, workspace);
    const [withFooter, plain, unpriced] = peer!.received.map((received) => received.mail);
    const line = "Tokens: 12000 in (8000 cached) / 900 out · Cost: $0.0042 · Duration: 83s";
    expect(withFooter!.text!.trimEnd()).toMatch(new RegExp(`\\n---\\n+${line.replace(/[$().]/g, "\\$&")}$`));
    expect(withFooter!.html).toMatch(new RegExp(`<hr ?/?>\\s*<p>${line.replace(/[$().]/g, "\\$&")}</p>`));
    expect(plain!.text).not.toContain("Tokens:");
    expect(plain!.html).not.toContain("Tokens:");
    expect(plain!.html).not.toMatch(/<hr/);
    expect(unpriced!.text).toContain("Cost: not known (a model has no price)");
  });

  it("logs a warning naming the delivery and the pattern when an attachment pattern matches nothing", async () => {
    await writeFile(join(workspace, "reports", "sales.csv"), "region,total\n");
    peer = await startSmtpPeer();
    const { log, lines } = captureLog();
    mailer = createMailer({ smtp: smtpFor(peer.port), stateDir, timezone: "UTC", log });
    await mailer.send(target({ attach: ["reports/*.csv", "reports/*.pdf", "charts/**"] }), message, DELIVERY_ID, workspace);
    expect(lines).toEqual(
      ["reports/*.pdf", "charts/**"].map((pattern) => ({
        level: "warn",
        msg: "no file in the workspace matched an attachment pattern",
        fields: { component: "email", delivery: DELIVERY_ID, workspace, pattern },
      })),
    );
    expect(peer.received[0]!.mail.attachments.map((a) => a.filename)).toEqual(["sales.csv"]);
  });

  it("puts the error and the last tool calls into a failure message", async () => {
    const sender = await smtpMailer();
    await sender.send(
      target(),
      {
        ...message,
        kind: "run.failed",
        run: { ...message.run, status: "error" },
        result: "",
        error: "provider answered HTTP 500 three times",
        lastToolCalls: [{ name: "web_fetch", status: "error", summary: "https://api.example.com → timeout" }],
      },
      DELIVERY_ID,
      workspace,
    );
    const { mail } = peer!.received[0]!;
    expect(mail.subject).toBe("[countd] daily-report error 2026-03-02");
    expect(mail.text).toContain("provider answered HTTP 500 three times");
    expect(mail.text).toContain("web_fetch  https://api.example.com → timeout");
    expect(mail.html).toContain("provider answered HTTP 500 three times");
  });

  it("never mails a file from outside the workspace: a symlinked folder is refused, a symlinked file not matched", async () => {
    const outside = join(dir, "outside");
    await mkdir(outside);
    await writeFile(join(outside, "secret.csv"), "outside");
    await symlink(outside, join(workspace, "linked"));
    await symlink(join(outside, "secret.csv"), join(workspace, "reports", "leak.csv"));
    const sender = await smtpMailer();

    const err = await failure(sender.send(target({ attach: ["linked/*.csv"] }), message, DELIVERY_ID, workspace));
    expect(err.permanent).toBe(true);
    expect(err.reason).toMatch(/^attachment refused: ".*secret\.csv" is outside the workspace/);
    expect(peer!.attempts).toEqual([]);

    await sender.send(target({ attach: ["reports/*.csv"] }), message, DELIVERY_ID, workspace);
    expect(peer!.received[0]!.mail.attachments).toEqual([]);
    expect(peer!.received[0]!.raw.toString()).not.toContain("outside");
  });

  it("451 is temporary and the same message goes through on the next attempt, once", async () => {
    const sender = await smtpMailer({ steps: [451] });
    const err = await failure(sender.send(target(), message, DELIVERY_ID, workspace));
    expect(err).toMatchObject({ permanent: false, responseCode: 451 });
    expect(err.reason).toContain("451");
    await sender.send(target(), message, DELIVERY_ID, workspace);
    expect(peer!.attempts).toEqual([451, "accept"]);
    expect(peer!.received.map((r) => r.mail.messageId)).toEqual([`<${DELIVERY_ID}@countd>`]);
  });

  it("550 is permanent", async () => {
    const sender = await smtpMailer({ steps: [550] });
    const err = await failure(sender.send(target(), message, DELIVERY_ID, workspace));
    expect(err).toMatchObject({ permanent: true, responseCode: 550 });
    expect(peer!.received).toEqual([]);
  });

  it("a connection dropped at once is temporary, and the next attempt is accepted", async () => {
    const sender = await smtpMailer({ steps: ["refuse"] });
    const err = await failure(sender.send(target(), message, DELIVERY_ID, workspace));
    expect(err.permanent).toBe(false);
    expect(err.responseCode).toBeUndefined();
    await sender.send(target(), message, DELIVERY_ID, workspace);
    expect(peer!.received).toHaveLength(1);
  });

  it("a refused connection (nothing listening) is temporary", async () => {
    const port = await closedPort();
    mailer = createMailer({ smtp: smtpFor(port), stateDir, timezone: "UTC" });
    const err = await failure(mailer.send(target(), message, DELIVERY_ID, workspace));
    expect(err.permanent).toBe(false);
    expect(err.reason).toContain(`mail server 127.0.0.1:${port}:`);
    expect(err.reason).toContain("ECONNREFUSED");
  });

  it("a wrong password is permanent", async () => {
    const sender = await smtpMailer({ auth: { user: "countd", pass: "right" } }, { user: "countd", password: "wrong" });
    const err = await failure(sender.send(target(), message, DELIVERY_ID, workspace));
    expect(err).toMatchObject({ permanent: true, responseCode: 535 });
    expect(err.reason).not.toContain("wrong");
  });

  it("logs in with the configured user", async () => {
    const sender = await smtpMailer({ auth: { user: "countd", pass: "right" } }, { user: "countd", password: "right" });
    await sender.send(target(), message, DELIVERY_ID, workspace);
    expect(peer!.received).toHaveLength(1);
  });

  it("warns once, naming the host, when smtp.user is set and the server offers no AUTH; not when it offers AUTH", async () => {
    const open = captureLog();
    peer = await startSmtpPeer();
    mailer = createMailer({ smtp: smtpFor(peer.port, { user: "countd", password: "right" }), stateDir, timezone: "UTC", log: open.log });
    await mailer.send(target(), message, DELIVERY_ID, workspace);
    await mailer.send(target(), message, DELIVERY_ID, workspace);
    expect(peer.received).toHaveLength(2);
    const warned = open.lines.filter((line) => line.level === "warn");
    expect(warned).toEqual([
      {
        level: "warn",
        msg: "smtp.user is set but the mail server offers no AUTH: mail is sent without signing in",
        fields: { component: "email", host: "127.0.0.1", port: peer.port },
      },
    ]);
    mailer.close();
    await peer.close();

    const guarded = captureLog();
    peer = await startSmtpPeer({ auth: { user: "countd", pass: "right" } });
    mailer = createMailer({ smtp: smtpFor(peer.port, { user: "countd", password: "right" }), stateDir, timezone: "UTC", log: guarded.log });
    await mailer.send(target(), message, DELIVERY_ID, workspace);
    expect(peer.received).toHaveLength(1);
    expect(guarded.lines.filter((line) => line.level === "warn")).toEqual([]);
  });
});

describe("email without SMTP settings", () => {
  it("writes the message as <state>/mail/<delivery id>.eml, the same message SMTP would carry", async () => {
    await writeFile(join(workspace, "reports", "north.csv"), "region,total\nnorth,12\n");
    mailer = createMailer({ stateDir, timezone: "Asia/Shanghai" });
    expect(mailer.usesFiles).toBe(true);
    const { info } = await mailer.send(target({ attach: ["reports/north.csv"] }), message, DELIVERY_ID, workspace);
    expect(info).toBe(join(stateDir, "mail", `${DELIVERY_ID}.eml`));
    expect(await readdir(join(stateDir, "mail"))).toEqual([`${DELIVERY_ID}.eml`]);
    const mail = await simpleParser(await readFile(info));
    expect(mail.messageId).toBe(`<${DELIVERY_ID}@countd>`);
    expect(mail.subject).toBe("[countd] daily-report ok 2026-03-02");
    expect(mail.html).toContain("<td>north</td>");
    expect(mail.text).toContain("north");
    expect(mail.attachments.map((a) => a.filename)).toEqual(["north.csv"]);
  });

  it("gives a delivery id that is not plain a stable, distinct Message-ID and file name", async () => {
    mailer = createMailer({ stateDir, timezone: "UTC" });
    const odd = "job..name:run/1@x";
    const first = await mailer.send(target(), message, odd, workspace);
    const again = await mailer.send(target(), message, odd, workspace);
    const other = await mailer.send(target(), message, "job..name:run/2@x", workspace);
    expect(again.info).toBe(first.info);
    expect(other.info).not.toBe(first.info);
    const mail = await simpleParser(await readFile(first.info));
    expect(mail.messageId).toMatch(/^<job-name-run-1-x\.[0-9a-f]{12}@countd>$/);
  });
});

async function closedPort(): Promise<number> {
  const server = createServer();
  const port = await listenLoopback(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
