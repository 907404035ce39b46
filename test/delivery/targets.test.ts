import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { describeTarget, parseDeliveryTargets, targetKey, type DeliveryTarget, type WebhookFormat } from "../../src/delivery/targets.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

function problems(input: unknown): string[] {
  try {
    parseDeliveryTargets(input, "deliver");
  } catch (err) {
    return (err as Error).message.split("\n");
  }
  throw new Error("expected the targets to be refused");
}

describe("parseDeliveryTargets", () => {
  it("reads the YAML form of both target kinds, with defaults", () => {
    const targets = parseDeliveryTargets(
      parse(`
- email:
    to: [ops@example.com]
    cc: [lead@example.com]
    subject: "Daily report {{date}}"
    attach: ["reports/*.csv"]
- webhook:
    url: https://hooks.example.com/countd
    secret: ${SECRET}
    headers: {X-Team: ops}
- email: {to: [root@localhost]}
- webhook: {url: "http://127.0.0.1:8080/feishu", format: feishu, secret: "any-feishu-secret"}
`),
      "deliver",
    );
    expect(targets).toEqual<DeliveryTarget[]>([
      {
        kind: "email",
        to: ["ops@example.com"],
        cc: ["lead@example.com"],
        bcc: [],
        subject: "Daily report {{date}}",
        attach: ["reports/*.csv"],
      },
      { kind: "webhook", url: "https://hooks.example.com/countd", secret: SECRET, format: "json", headers: { "X-Team": "ops" } },
      { kind: "email", to: ["root@localhost"], cc: [], bcc: [], attach: [] },
      { kind: "webhook", url: "http://127.0.0.1:8080/feishu", secret: "any-feishu-secret", format: "feishu", headers: {} },
    ]);
  });

  it("names the field and the value of each mistake", () => {
    expect(
      problems([
        { email: { to: ["ops@", "ok@example.com"], subject: "Report {{weather}}", attach: ["/etc/passwd", "../outside.csv"] } },
        { webhook: { url: "ftp://files.example.com/drop" } },
        { sms: { to: "+100" } },
        { email: { to: ["a@example.com"] }, webhook: { url: "https://x.example.com" } },
      ]),
    ).toEqual([
      'deliver[0].email.to[0]: expected an email address like "ops@example.com", got "ops@"',
      "deliver[0].email.subject: unknown placeholder {{weather}} (known: {{job.name}}, {{date}}, {{time}}, {{status}}, {{run.id}}, {{output.…}})",
      'deliver[0].email.attach[0]: expected a path or glob inside the workspace like "reports/*.csv", got "/etc/passwd"',
      'deliver[0].email.attach[1]: expected a path or glob inside the workspace like "reports/*.csv", got "../outside.csv"',
      'deliver[1].webhook.url: expected an http(s) URL like "https://api.example.com/v1", got "ftp://files.example.com/drop"',
      "deliver[2].sms: unknown key",
      'deliver[2]: expected a delivery target: "email:" or "webhook:"',
      "deliver[3]: one target per list item: put email: and webhook: in separate items",
    ]);
  });

  it("checks each format's secret form without ever quoting the secret", () => {
    const leaked = "not-a-whsec-secret-value";
    const found = problems([
      { webhook: { url: "https://a.example.com", secret: leaked } },
      { webhook: { url: "https://b.example.com", format: "dingtalk", secret: leaked } },
      { webhook: { url: "https://c.example.com", format: "slack", secret: leaked } },
      { webhook: { url: "https://d.example.com", headers: { "Webhook-Signature": leaked, Authorization: `Bearer ${leaked}\r\nX: y` } } },
    ]);
    expect(found).toEqual([
      'deliver[0].webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (the value is not shown here)',
      'deliver[1].webhook.secret: expected the DingTalk robot\'s signing secret, which starts with "SEC" (the value is not shown here)',
      "deliver[2].webhook.secret: slack webhooks are not signed (the URL is the secret): remove secret",
      "deliver[3].webhook.headers.Authorization: a header value cannot hold a line break or NUL",
      "deliver[3].webhook.headers.Webhook-Signature: Webhook-Signature is set by countd and cannot be given",
    ]);
    expect(found.join("\n")).not.toContain(leaked);
  });

  it("takes an empty secret (an unset ${VAR:-}) as no secret", () => {
    expect(parseDeliveryTargets([{ webhook: { url: "https://a.example.com", secret: "" } }], "on_failure")).toEqual([
      { kind: "webhook", url: "https://a.example.com", format: "json", headers: {} },
    ]);
  });

  it("keeps ${VAR} references as written where an address, URL, secret or header value goes, and checks their form only once filled in", () => {
    const targets = parseDeliveryTargets(
      parse(`
- email: {to: ["\${OPS_EMAIL}"], bcc: ["\${AUDIT:-audit@example.com}"]}
- webhook:
    url: \${SLACK_HOOK_URL}
    format: slack
- webhook:
    url: "https://oapi.dingtalk.com/robot/send?access_token=\${DINGTALK_TOKEN}"
    format: dingtalk
    secret: \${DINGTALK_SECRET}
    headers: {Authorization: "Bearer \${API_TOKEN}"}
`),
      "deliver",
    );
    expect(targets).toEqual<DeliveryTarget[]>([
      { kind: "email", to: ["${OPS_EMAIL}"], cc: [], bcc: ["${AUDIT:-audit@example.com}"], attach: [] },
      { kind: "webhook", url: "${SLACK_HOOK_URL}", format: "slack", headers: {} },
      {
        kind: "webhook",
        url: "https://oapi.dingtalk.com/robot/send?access_token=${DINGTALK_TOKEN}",
        secret: "${DINGTALK_SECRET}",
        format: "dingtalk",
        headers: { Authorization: "Bearer ${API_TOKEN}" },
      },
    ]);
  });

  it("refuses a secret for a format that does not sign, even as a reference", () => {
    expect(problems([{ webhook: { url: "${SLACK_HOOK_URL}", format: "slack", secret: "${SLACK_SECRET}" } }])).toEqual([
      "deliver[0].webhook.secret: slack webhooks are not signed (the URL is the secret): remove secret",
    ]);
  });

  it("names an unknown format", () => {
    expect(problems([{ webhook: { url: "https://a.example.com", format: "teams" } }])).toEqual([
      'deliver[0].webhook.format: expected one of json, output, slack, discord, feishu, dingtalk, wecom, got "teams"',
    ]);
  });

  it("takes an email target's footer: usage, and names any other footer", () => {
    expect(parseDeliveryTargets(parse("- email: { to: [a@example.com], footer: usage }"), "deliver")).toEqual([
      { kind: "email", to: ["a@example.com"], cc: [], bcc: [], attach: [], footer: "usage" },
    ]);
    expect(problems([{ email: { to: ["a@example.com"], footer: "tokens" } }])).toEqual([
      'deliver[0].email.footer: expected one of usage, got "tokens"',
    ]);
  });

  it("accepts nothing but a list", () => {
    expect(problems({ email: { to: ["a@example.com"] } })).toEqual(["deliver: expected a list of delivery targets, got a mapping"]);
  });
});

describe("targetKey", () => {
  const email: DeliveryTarget = { kind: "email", to: ["a@example.com", "b@example.com"], cc: [], bcc: [], attach: [] };
  const hook: DeliveryTarget = {
    kind: "webhook",
    url: "https://hooks.example.com:8443/x?token=abc",
    secret: SECRET,
    format: "json",
    headers: { Authorization: "Bearer 1" },
  };

  it("is the same for the same target, whatever the recipients' order or the secret", () => {
    expect(targetKey({ ...email, to: ["b@example.com", "a@example.com"] })).toBe(targetKey(email));
    expect(targetKey({ ...hook, secret: "whsec_cm90YXRlZA==", headers: { Authorization: "Bearer 2" } })).toBe(targetKey(hook));
  });

  it("differs between targets and holds only characters fit for a Message-ID or a file name", () => {
    const keys = [
      targetKey(email),
      targetKey({ ...email, to: ["a@example.com"] }),
      targetKey({ ...email, subject: "Other {{date}}" }),
      targetKey({ ...email, footer: "usage" }),
      targetKey(hook),
      targetKey({ ...hook, format: "slack" }),
      targetKey({ ...hook, url: "https://hooks.example.com:8443/y" }),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    for (const key of keys) expect(key).toMatch(/^[a-z0-9-]+(\.[a-z0-9-]+)*$/);
    expect(targetKey(hook)).toMatch(/^webhook-hooks\.example\.com-[0-9a-f]{12}$/);
  });

  it("of an email target without a footer is what it was before footers existed, so its queued deliveries keep their ids", () => {
    const digest = createHash("sha256")
      .update(JSON.stringify({ to: ["a@example.com", "b@example.com"], cc: [], bcc: [], attach: [] }))
      .digest("hex")
      .slice(0, 12);
    expect(targetKey(email)).toBe(`email-${digest}`);
  });

  it("is taken from a ${VAR} URL as written, named after its variable", () => {
    const slack: DeliveryTarget = { kind: "webhook", url: "${SLACK_HOOK_URL}", format: "slack", headers: {} };
    expect(targetKey(slack)).toMatch(/^webhook-slack-hook-url-[0-9a-f]{12}$/);
    expect(targetKey({ ...slack, url: "https://${HOOK_HOST}/countd" })).toMatch(/^webhook-hook-host-[0-9a-f]{12}$/);
    expect(targetKey({ ...slack, url: "${OTHER_URL}" })).not.toBe(targetKey(slack));
  });
});

describe("describeTarget", () => {
  const hook = (url: string, format: WebhookFormat = "json") => describeTarget({ kind: "webhook", url, format, headers: {} });
  const fingerprint = (secret: string) => `[redacted:${createHash("sha256").update(secret).digest("hex").slice(0, 4)}]`;

  it("shows who receives it: a webhook's whole URL, its secrets redacted", () => {
    expect(describeTarget({ kind: "email", to: ["a@example.com"], cc: ["b@example.com"], bcc: [], attach: [] })).toBe(
      "email to a@example.com and 1 more",
    );
    expect(hook("https://hooks.slack.com/services/T0/B0/SECRETPATH", "slack")).toBe(
      `slack webhook at https://hooks.slack.com/services/T0/B0/${fingerprint("SECRETPATH")}`,
    );
    expect(hook("${SLACK_HOOK_URL}", "slack")).toBe("slack webhook at ${SLACK_HOOK_URL}");
    expect(hook("https://${HOOK_HOST}:8443/x?t=${TOKEN}")).toBe("json webhook at https://${HOOK_HOST}:8443/x?t=${TOKEN}");
    expect(hook("https://oapi.dingtalk.com/robot/send?access_token=0123abcd", "dingtalk")).toBe(
      `dingtalk webhook at https://oapi.dingtalk.com/robot/send?access_token=${fingerprint("0123abcd")}`,
    );
    expect(hook("https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7aaa-4bc4", "wecom")).toBe(
      `wecom webhook at https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=${fingerprint("693a91f6-7aaa-4bc4")}`,
    );
    expect(hook("https://discord.com/api/webhooks/123456789012345678/tok", "discord")).toBe(
      `discord webhook at https://discord.com/api/webhooks/123456789012345678/${fingerprint("tok")}`,
    );
    expect(hook("https://ops:hunter2@hooks.example.com/team-a/countd?region=eu&sig=x1")).toBe(
      `json webhook at https://ops:${fingerprint("hunter2")}@hooks.example.com/team-a/countd?region=eu&sig=${fingerprint("x1")}`,
    );
    expect(hook("https://hooks.example.com/v1/a8f3c2e19b7d4f60/countd")).toBe(
      `json webhook at https://hooks.example.com/v1/${fingerprint("a8f3c2e19b7d4f60")}/countd`,
    );
  });

  it("tells two hooks on one host apart, by path or by the fingerprint of their token", () => {
    expect(hook("https://hooks.example.com/team-a")).not.toBe(hook("https://hooks.example.com/team-b"));
    const [a, b] = [
      "https://open.feishu.cn/open-apis/bot/v2/hook/2bd5b2b8-aaaa",
      "https://open.feishu.cn/open-apis/bot/v2/hook/9c0e1f2a-bbbb",
    ].map((url) => hook(url, "feishu"));
    expect(a).not.toBe(b);
    expect(`${a} ${b}`).not.toMatch(/2bd5b2b8|9c0e1f2a/);
  });
});
