import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { DeliveryError } from "../../src/delivery/errors.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { OutboxStore } from "../../src/store/outbox-store.js";
import { resolveTarget, unresolvedVariables } from "../../src/delivery/secrets.js";
import { parseDeliveryTargets, type DeliveryTarget, type WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import { emptyUsage } from "../../src/providers/types.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { completedMessage } from "../support/delivery-message.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TOKEN = "tok-9f8e7d6c5b4a";

const hook = (fields: Partial<WebhookTarget>): WebhookTarget => ({
  kind: "webhook",
  url: "https://hooks.example.com/countd",
  format: "json",
  headers: {},
  ...fields,
});

/** The error resolveTarget throws, checked to be one the outbox marks dead at once. */
function refusal(target: DeliveryTarget, env: NodeJS.ProcessEnv): DeliveryError {
  try {
    resolveTarget(target, env);
  } catch (err) {
    expect(err).toBeInstanceOf(DeliveryError);
    expect((err as DeliveryError).permanent).toBe(true);
    return err as DeliveryError;
  }
  throw new Error("expected the target to be refused");
}

describe("resolveTarget", () => {
  it("fills in the URL, secret, header values and addresses, leaving the target as written untouched", () => {
    const written = hook({
      url: "https://hooks.example.com/${HOOK_PATH}?team=${TEAM:-ops}",
      secret: "${COUNTD_WEBHOOK_SECRET}",
      headers: { Authorization: "Bearer ${API_TOKEN}", "X-Team": "ops" },
    });
    const env = { HOOK_PATH: "countd", COUNTD_WEBHOOK_SECRET: SECRET, API_TOKEN: TOKEN };
    expect(resolveTarget(written, env)).toEqual(
      hook({
        url: "https://hooks.example.com/countd?team=ops",
        secret: SECRET,
        headers: { Authorization: `Bearer ${TOKEN}`, "X-Team": "ops" },
      }),
    );
    expect(written.secret).toBe("${COUNTD_WEBHOOK_SECRET}");

    const mail: DeliveryTarget = {
      kind: "email",
      to: ["${OPS_EMAIL}"],
      cc: ["lead@example.com"],
      bcc: ["${AUDIT_EMAIL:-audit@example.com}"],
      attach: [],
    };
    expect(resolveTarget(mail, { OPS_EMAIL: "ops@example.com" })).toEqual({ ...mail, to: ["ops@example.com"], bcc: ["audit@example.com"] });
  });

  it("drops a secret that comes out empty: ${VAR:-} signs only when the variable is set", () => {
    expect(resolveTarget(hook({ secret: "${COUNTD_WEBHOOK_SECRET:-}" }), {})).toEqual(hook({}));
    expect(resolveTarget(hook({ secret: "${COUNTD_WEBHOOK_SECRET:-}" }), { COUNTD_WEBHOOK_SECRET: SECRET }).secret).toBe(SECRET);
  });

  it("refuses for good an unset variable, naming it and not the values of the others", () => {
    const error = refusal(hook({ url: "${SLACK_HOOK_URL}", format: "slack", headers: { "X-Key": "${API_TOKEN}" } }), { API_TOKEN: TOKEN });
    expect(error.reason).toBe(
      "webhook.url: environment variable SLACK_HOOK_URL is not set: fix the environment, restart countd, then run `countd outbox retry`",
    );
    expect(error.reason).not.toContain(TOKEN);
  });

  it("refuses for good a value of the wrong form once filled in, without showing it", () => {
    const leaked = "not-a-standard-webhooks-secret";
    const error = refusal(hook({ secret: "${COUNTD_WEBHOOK_SECRET}", url: "${HOOK_URL}" }), {
      COUNTD_WEBHOOK_SECRET: leaked,
      HOOK_URL: "ftp://files.example.com/x",
    });
    expect(error.reason).toBe(
      [
        'webhook.url: expected an http(s) URL like "https://hooks.example.com/countd" (filled in from HOOK_URL; the value is not shown here)',
        'webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (filled in from COUNTD_WEBHOOK_SECRET; the value is not shown here): fix the environment, restart countd, then run `countd outbox retry`',
      ].join("; "),
    );
    expect(error.reason).not.toContain(leaked);
    expect(error.reason).not.toContain("files.example.com");
  });
});

describe("unresolvedVariables", () => {
  it("lists each unset variable without a default once", () => {
    const target = hook({
      url: "https://${HOST}/${HOOK_PATH:-x}",
      secret: "${COUNTD_WEBHOOK_SECRET}",
      headers: { A: "${HOST}", B: "${EMPTY}" },
    });
    expect(unresolvedVariables(target, { EMPTY: "" })).toEqual(["HOST", "COUNTD_WEBHOOK_SECRET"]);
    expect(unresolvedVariables(target, { HOST: "h.example.com", COUNTD_WEBHOOK_SECRET: SECRET, EMPTY: "" })).toEqual([]);
  });
});

describe("secrets in the outbox", () => {
  let stateDir: string;
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    stateDir = await mkdtemp(join(tmpdir(), "countd-secrets-"));
    receiver = await startWebhookReceiver({ secret: SECRET });
  });

  afterEach(async () => {
    await receiver.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  it("are written to disk as ${VAR} references and filled in only to send: the receiver verifies the signature", async () => {
    const env = { HOOK_URL: receiver.url, COUNTD_WEBHOOK_SECRET: SECRET, API_TOKEN: TOKEN };
    const targets = parseDeliveryTargets(
      parse(`
- webhook:
    url: \${HOOK_URL}
    secret: \${COUNTD_WEBHOOK_SECRET}
    headers: {Authorization: "Bearer \${API_TOKEN}"}
`),
      "deliver",
    );
    const outbox = await Outbox.open({
      stateDir,
      send: async (entry) => {
        if (entry.target.kind === "webhook") await sendWebhook(resolveTarget(entry.target, env), entry.message, entry.id);
      },
    });
    const message = completedMessage({
      job: "daily-report",
      runId: "20260302T080000Z-1a2b",
      startedAt: "2026-03-02T08:00:00.000Z",
      result: "All green.",
      usage: emptyUsage(),
    });
    const [id] = await outbox.enqueue("daily-report.20260302T080000Z-1a2b", targets, message, stateDir);

    const onDisk = await readFile(join(stateDir, "outbox.jsonl"), "utf8");
    expect((await OutboxStore.read(stateDir, new Date())).entries[id!]!.target).toEqual({
      kind: "webhook",
      url: "${HOOK_URL}",
      secret: "${COUNTD_WEBHOOK_SECRET}",
      format: "json",
      headers: { Authorization: "Bearer ${API_TOKEN}" },
    });
    for (const value of Object.values(env)) expect(onDisk).not.toContain(value);

    await outbox.runDue();
    expect(outbox.deliveredAt(id!)).toBeDefined();
    expect(receiver.requests).toEqual([expect.objectContaining({ verified: true, status: 200 })]);
    expect(receiver.requests[0]!.headers).toMatchObject({ "webhook-id": id, authorization: `Bearer ${TOKEN}` });
  });
});
