import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { allRuns, logLines, runCountd } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// Each test runs countd as a process of its own, as a user would: slow on a loaded machine.
describe("countd test-delivery", { timeout: 60_000 }, () => {
  let dir: string;
  let smtp: SmtpPeer;
  let hook: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-test-delivery-"));
    await mkdir(join(dir, "jobs"));
    smtp = await startSmtpPeer();
    hook = await startWebhookReceiver({ secret: SECRET });
  });
  afterEach(async () => {
    await smtp.close();
    await hook.close();
    await rm(dir, { recursive: true, force: true });
  });

  const configure = (smtpSettings: string | undefined, extra = "") =>
    writeFile(
      join(dir, "countd.yaml"),
      `tools:\n  exec:\n    sandbox: none\njob_env: [HOOK_SECRET, HOOK_URL]\nsecrets: [HOOK_SECRET]\n${smtpSettings ?? ""}${extra}`,
    );
  const smtpSettings = (port: number, auth = "") => `smtp:\n  host: 127.0.0.1\n  port: ${port}\n  from: countd@example.com\n${auth}`;
  const reportJob = (deliver: string, onFailure = "") =>
    writeFile(
      join(dir, "jobs", "report.yaml"),
      `prompt: Report the numbers.\nschedule: "0 9 * * *"\ndeliver:\n${deliver}${onFailure ? `on_failure:\n${onFailure}` : ""}`,
    );
  const countd = (args: string[], env: Record<string, string> = {}) => runCountd(args, { cwd: dir, env: { HOOK_SECRET: SECRET, ...env } });

  it("sends a marked test to each distinct target of deliver and on_failure and says each was accepted", async () => {
    await configure(smtpSettings(smtp.port));
    await reportJob(
      `  - email: { to: [boss@example.com] }\n  - webhook: { url: '${hook.url}', secret: '\${HOOK_SECRET}' }\n`,
      "  - email: { to: [boss@example.com] }\n",
    );
    const result = await countd(["test-delivery", "report"]);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^email to boss@example\.com: ok/);
    expect(lines[1]).toBe(`json webhook at ${hook.url}: ok (HTTP 200)`);

    expect(smtp.received).toHaveLength(1);
    const { mail } = smtp.received[0]!;
    expect(mail.subject).toBe("[countd test] report");
    expect(mail.text).toContain("This is a test message from countd for the job report");
    expect(mail.text).toContain("No run happened");

    expect(hook.requests).toHaveLength(1);
    const [request] = hook.requests;
    expect(request!.verified).toBe(true);
    const body = JSON.parse(request!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ type: "test", job: "report" });
    expect(body).not.toHaveProperty("run");

    // It changed nothing: no run recorded, nothing queued.
    expect(await allRuns(join(dir, "state"))).toEqual([]);
    expect((await countd(["outbox", "--json"])).stdout).toBe("[]\n");
  });

  it("says failed with the receiver's answer and exits 1 when a target refuses", async () => {
    await configure(smtpSettings(smtp.port));
    hook.script(500);
    await reportJob(`  - email: { to: [boss@example.com] }\n  - webhook: { url: '${hook.url}', secret: '\${HOOK_SECRET}' }\n`);
    const result = await countd(["test-delivery", "report"]);
    expect(result.code).toBe(1);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^email to boss@example\.com: ok/);
    expect(lines[1]).toBe(`json webhook at ${hook.url}: failed: ${new URL(hook.url).origin} answered HTTP 500`);
  });

  it("names the jobs there are for an unknown job, exit 1", async () => {
    await configure(smtpSettings(smtp.port));
    await reportJob("  - email: { to: [boss@example.com] }\n");
    const result = await countd(["test-delivery", "nosuch"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no job named "nosuch"');
    expect(result.stderr).toContain("(jobs: report)");
    expect(smtp.received).toHaveLength(0);
  });

  it("exits 78 naming a variable a target names that is unset, sending nothing", async () => {
    await configure(smtpSettings(smtp.port));
    await reportJob("  - email: { to: [boss@example.com] }\n  - webhook: { url: '${HOOK_URL}' }\n");
    const result = await countd(["test-delivery", "report"]);
    expect(result.code).toBe(78);
    expect(result.stderr).toMatch(/jobs\/report\.yaml:5:\d+: .*environment variable HOOK_URL is not set/);
    expect(smtp.received).toHaveLength(0);
  });

  it("writes the mail to the state directory as the daemon does when there are no smtp settings, and says so", async () => {
    await configure(undefined);
    await reportJob("  - email: { to: [boss@example.com] }\n");
    const result = await countd(["test-delivery", "report"]);
    expect(result.code).toBe(0);
    const mailDir = join(dir, "state", "mail");
    expect(result.stderr).toContain(`no smtp settings in countd.yaml: mail is written to ${mailDir}/ as .eml files, as the daemon does`);
    const [file] = await readdir(mailDir);
    expect(result.stdout).toBe(`email to boss@example.com: ok (written to ${join(mailDir, file!)})\n`);
    expect(await readFile(join(mailDir, file!), "utf8")).toContain("Subject: [countd test] report");
  });

  it("tests the heartbeat's targets as @heartbeat", async () => {
    await configure(smtpSettings(smtp.port), "heartbeat:\n  enabled: true\n  deliver:\n    - email: { to: [me@example.com] }\n");
    const result = await countd(["test-delivery", "@heartbeat"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^email to me@example\.com: ok/);
    expect(smtp.received[0]!.mail.subject).toBe("[countd test] @heartbeat");
  });

  it("warns when smtp.user is set and the server offers no AUTH, and not when it does", async () => {
    const auth = "  user: countd\n  password: s3cret-pass\n";
    await configure(smtpSettings(smtp.port, auth));
    await reportJob("  - email: { to: [boss@example.com] }\n");
    const open = await countd(["test-delivery", "report"]);
    expect(open.code).toBe(0);
    const [warning] = logLines(open.stderr).filter((line) => line["level"] === 40);
    expect(warning).toMatchObject({ component: "email", host: "127.0.0.1" });
    expect(String(warning!["msg"])).toContain("offers no AUTH");

    const guarded = await startSmtpPeer({ auth: { user: "countd", pass: "s3cret-pass" } });
    try {
      await configure(smtpSettings(guarded.port, auth));
      const signedIn = await countd(["test-delivery", "report"]);
      expect(signedIn.code).toBe(0);
      expect(signedIn.stderr).not.toContain("AUTH");
      expect(guarded.received).toHaveLength(1);
    } finally {
      await guarded.close();
    }
  });
});
