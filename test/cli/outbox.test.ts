import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer } from "../../src/delivery/email.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { completedMessage } from "../support/delivery-message.js";

const countd = (args: string[], cwd: string) => runCountd(args, { cwd });

describe("countd outbox", () => {
  let dir: string;
  let receiver: WebhookReceiver;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-outbox-cli-"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    receiver = await startWebhookReceiver({ steps: [400, 200] });
  });
  afterEach(async () => {
    await receiver.close();
  });

  it("lists a dead delivery with its error, and sends it again with retry --dead", async () => {
    const state = join(dir, "state");
    const mailer = createMailer({ stateDir: state, timezone: "UTC" });
    const outbox = await Outbox.open({ stateDir: state, send: sendEntry(mailer, {}) });
    const now = new Date().toISOString();
    const [id] = await outbox.enqueue(
      "report.20261130T090000Z-ab12",
      [{ kind: "webhook", url: receiver.url, format: "json", headers: {} }],
      completedMessage({
        job: "report",
        runId: "20261130T090000Z-ab12",
        reason: "manual",
        startedAt: now,
        durationMs: 0,
        result: "all good",
      }),
      join(dir, "workspace"),
    );
    await outbox.runDue();
    await outbox.stop();
    mailer.close();

    const listed = await countd(["outbox"], dir);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      new RegExp(`${id!.replace(/\./g, "\\.")}\\s+dead\\s+json webhook at http://127\\.0\\.0\\.1:\\d+/hook\\s+1\\s+-\\s+.*400`),
    );

    const retried = await countd(["outbox", "retry", "--dead"], dir);
    expect(retried).toMatchObject({ code: 0, stdout: "1 queued again; now 0 pending, 0 dead\n" });
    expect(receiver.acknowledgedIds()).toEqual([id]);
    expect((await countd(["outbox", "--json"], dir)).stdout).toBe("[]\n");
  });

  it("shows two hooks on one host apart by their whole URL, tokens redacted, and says how to enable a target disabled by 410", async () => {
    const gone = await startWebhookReceiver({ steps: [410, 410] });
    const state = join(dir, "state");
    const mailer = createMailer({ stateDir: state, timezone: "UTC" });
    const outbox = await Outbox.open({ stateDir: state, send: sendEntry(mailer, {}) });
    const origin = new URL(gone.url).origin;
    const tokens = ["tok-a-0123456789", "tok-b-9876543210"];
    const now = new Date().toISOString();
    await outbox.enqueue(
      "report.20261130T090000Z-ab12",
      tokens.map((token, i) => ({
        kind: "webhook" as const,
        url: `${origin}/services/team-${i}/${token}`,
        format: "slack" as const,
        headers: {},
      })),
      completedMessage({
        job: "report",
        runId: "20261130T090000Z-ab12",
        reason: "manual",
        startedAt: now,
        durationMs: 0,
        result: "all good",
      }),
      join(dir, "workspace"),
    );
    await outbox.runDue();
    await outbox.stop();
    mailer.close();
    await gone.close();

    const listed = await countd(["outbox"], dir);
    expect(listed.code).toBe(0);
    for (const token of tokens) expect(listed.stdout).not.toContain(token);
    const shown = [0, 1].map(
      (i) => new RegExp(`slack webhook at ${origin.replace(/\./g, "\\.")}/services/team-${i}/\\[redacted:[0-9a-f]{4}\\]`),
    );
    for (const pattern of shown) expect(listed.stdout.match(new RegExp(pattern.source, "g"))).toHaveLength(2);
    expect(listed.stdout).toContain("Disabled targets (they answered HTTP 410; nothing is sent to them):");
    expect(listed.stdout).toContain(
      "Enable one again by changing its URL in the job file, by SIGHUP to the daemon, or with `countd outbox retry <id>` / `--dead`.",
    );
  });
});
