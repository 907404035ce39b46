import { createHmac } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { DeliveryError } from "../../src/delivery/errors.js";
import { DISCORD_MAX_CHARS, splitMessage, truncateUtf8, WECOM_MAX_BYTES } from "../../src/delivery/formats.js";
import type { DeliveryMessage } from "../../src/delivery/message.js";
import type { WebhookFormat, WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import { startWebhookReceiver, type ReceiverStep, type WebhookReceiver } from "../support/webhook-receiver.js";
import { completedMessage } from "../support/delivery-message.js";

const NOW = new Date("2026-03-01T09:02:00.123Z");

const message = completedMessage({
  job: "daily-report",
  runId: "20260301T090000Z-ab12",
  startedAt: "2026-03-01T09:00:00.000Z",
  durationMs: 90_000,
  result: "Sales are **up 4%**.\nSee the attached sheet.",
});

let peer: WebhookReceiver | undefined;
afterEach(async () => {
  await peer?.close();
  peer = undefined;
});

/** Sends through a real receiver and returns what it got. */
async function deliver(
  format: WebhookFormat,
  opts: { secret?: string; result?: string; steps?: ReceiverStep[]; message?: DeliveryMessage } = {},
) {
  peer = await startWebhookReceiver({ steps: opts.steps });
  const target: WebhookTarget = {
    kind: "webhook",
    url: `${peer.url}?access_token=t0k3n`,
    format,
    headers: {},
    ...(opts.secret ? { secret: opts.secret } : {}),
  };
  const sending = opts.message ?? message;
  const sent = await sendWebhook(target, { ...sending, result: opts.result ?? sending.result }, "delivery-1", { now: () => NOW });
  return {
    sent,
    requests: peer.requests.map((r) => ({ url: new URL(r.url, "http://x"), body: JSON.parse(r.body) as Record<string, any> })),
  };
}

describe("chat formats: the body each service expects", () => {
  it("slack: {text}", async () => {
    const { requests } = await deliver("slack");
    expect(requests).toHaveLength(1);
    expect(requests[0]!.body).toEqual({ text: "*daily-report: completed*\n\nSales are *up 4%*.\nSee the attached sheet." });
  });

  it("discord: {content} split into messages of at most 2,000 characters, mentions disabled", async () => {
    const paragraph = `${"word ".repeat(150).trim()}\n`;
    const result = `${paragraph.repeat(6)}\`\`\`\n${"code line\n".repeat(150)}\`\`\`\n@everyone done`;
    const { requests } = await deliver("discord", { result });
    expect(requests.length).toBeGreaterThan(2);
    for (const { body } of requests) {
      expect(body.content.length).toBeLessThanOrEqual(DISCORD_MAX_CHARS);
      expect(body.allowed_mentions).toEqual({ parse: [] });
      expect((body.content.match(/^```/gm) ?? []).length % 2).toBe(0);
    }
    const joined = requests.map((r) => r.body.content as string).join("\n");
    expect(joined.startsWith("**daily-report: completed**\n\n")).toBe(true);
    expect(joined.match(/word/g)).toHaveLength(900);
    expect(joined.match(/code line/g)).toHaveLength(150);
    expect(joined.endsWith("@everyone done")).toBe(true);
  });

  it("discord: a part that fails fails the delivery, saying a retry sends every part again", async () => {
    const err = await deliver("discord", { result: "x ".repeat(1500), steps: [204, 500] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeliveryError);
    expect((err as DeliveryError).permanent).toBe(false);
    expect((err as DeliveryError).reason).toContain("(message part 2 of 2; a retry sends every part again)");
  });

  it("feishu: a message card with the title in its header and the answer as card markdown, signed with timestamp and sign", async () => {
    const secret = "feishu-signing-secret";
    const { requests } = await deliver("feishu", { secret });
    const { body } = requests[0]!;
    const timestamp = String(Math.floor(NOW.getTime() / 1000));
    expect(body.timestamp).toBe(timestamp);
    expect(body.sign).toBe(createHmac("sha256", `${timestamp}\n${secret}`).update("").digest("base64"));
    expect(body.msg_type).toBe("interactive");
    expect(body.card).toEqual({
      header: { title: { tag: "plain_text", content: "daily-report: completed" } },
      elements: [{ tag: "markdown", content: "Sales are **up 4%**.\nSee the attached sheet." }],
    });
  });

  it("a heartbeat check-in is headed by its sender's name, as its mail subject is, not by its run-history name", async () => {
    const checkIn: DeliveryMessage = { ...message, kind: "heartbeat", job: "@heartbeat", persona: "Ava", result: "Two invoices are due." };
    const { requests } = await deliver("feishu", { message: checkIn });
    expect(requests[0]!.body.card.header).toEqual({ title: { tag: "plain_text", content: "Ava: check-in" } });
  });

  it("feishu: unsigned without a secret, and cut to fit Feishu's 20 KB body limit", async () => {
    const { requests } = await deliver("feishu", { result: "数据行\n".repeat(5000) });
    const { body } = requests[0]!;
    expect(body).not.toHaveProperty("sign");
    expect(Buffer.byteLength(JSON.stringify(body))).toBeLessThanOrEqual(20_000);
    expect(body.card.elements[0].content.endsWith("…(truncated)")).toBe(true);
  });

  it("dingtalk: markdown with title and text, sent to the URL signed with timestamp (ms) and sign", async () => {
    const secret = "SECdingtalk0123456789";
    const { requests } = await deliver("dingtalk", { secret });
    const { url, body } = requests[0]!;
    const timestamp = String(NOW.getTime());
    expect(url.searchParams.get("access_token")).toBe("t0k3n");
    expect(url.searchParams.get("timestamp")).toBe(timestamp);
    expect(url.searchParams.get("sign")).toBe(createHmac("sha256", secret).update(`${timestamp}\n${secret}`).digest("base64"));
    expect(body).toEqual({
      msgtype: "markdown",
      markdown: { title: "daily-report: completed", text: "#### daily-report: completed\n\nSales are **up 4%**.\nSee the attached sheet." },
    });
  });

  it("wecom: markdown content within 4,096 bytes, cut on a character boundary", async () => {
    const { requests } = await deliver("wecom", { result: "销售额增长了百分之四。".repeat(400) });
    const content = requests[0]!.body.markdown.content as string;
    expect(requests[0]!.body.msgtype).toBe("markdown");
    expect(content.startsWith("**daily-report: completed**\n\n销售额")).toBe(true);
    expect(Buffer.byteLength(content)).toBeLessThanOrEqual(WECOM_MAX_BYTES);
    expect(content).not.toContain("\uFFFD");
    expect(content.endsWith("…(truncated)")).toBe(true);
  });
});

describe("chat formats: each service gets the markup it renders", () => {
  const answer = [
    "## Weekly sales",
    "",
    "Sales are **up 4%**, *really* ~~down~~. See [the sheet](https://example.com/s?id=1) and `npm test`.",
    "",
    "- north",
    "- south",
    "",
    "1. first",
    "2. second",
    "",
    "```sh",
    "npm run report",
    "```",
    "",
    "> Quoted <!channel> & <at id=all></at>",
  ].join("\n");
  const sent = async (format: WebhookFormat) => (await deliver(format, { result: answer })).requests.map((r) => r.body);

  it("slack: mrkdwn, with Slack's control characters escaped so a quoted <!channel> pings no one", async () => {
    expect(await sent("slack")).toEqual([
      {
        text: [
          "*daily-report: completed*",
          "",
          "*Weekly sales*",
          "",
          "Sales are *up 4%*, _really_ ~down~. See <https://example.com/s?id=1|the sheet> and `npm test`.",
          "",
          "• north",
          "• south",
          "",
          "1. first",
          "2. second",
          "",
          "```",
          "npm run report",
          "```",
          "",
          "> Quoted &lt;!channel&gt; &amp; &lt;at id=all&gt;&lt;/at&gt;",
        ].join("\n"),
      },
    ]);
  });

  it("discord: its markdown, as written", async () => {
    expect(await sent("discord")).toEqual([{ content: `**daily-report: completed**\n\n${answer}`, allowed_mentions: { parse: [] } }]);
  });

  it("discord: headings below level 3, which Discord does not render, become bold lines", async () => {
    const { requests } = await deliver("discord", { result: "#### Detail\n\ntext" });
    expect(requests[0]!.body.content).toBe("**daily-report: completed**\n\n**Detail**\n\ntext");
  });

  it("feishu: card markdown, headings as bold lines and tags escaped so <at id=all> mentions no one", async () => {
    const [body] = await sent("feishu");
    expect(body!.card.elements).toEqual([
      {
        tag: "markdown",
        content: [
          "**Weekly sales**",
          "",
          "Sales are **up 4%**, *really* ~~down~~. See [the sheet](https://example.com/s?id=1) and `npm test`.",
          "",
          "- north",
          "- south",
          "",
          "1. first",
          "2. second",
          "",
          "```sh",
          "npm run report",
          "```",
          "",
          "> Quoted &lt;!channel&gt; & &lt;at id=all&gt;&lt;/at&gt;",
        ].join("\n"),
      },
    ]);
  });

  it("dingtalk and wecom: their markdown, code as quoted lines (neither renders code blocks), no strike-through", async () => {
    const [dingtalk] = await sent("dingtalk");
    await peer?.close();
    const [wecom] = await sent("wecom");
    const body = (code: string) =>
      [
        "## Weekly sales",
        "",
        `Sales are **up 4%**, *really* down. See [the sheet](https://example.com/s?id=1) and ${code}.`,
        "",
        "- north",
        "- south",
        "",
        "1. first",
        "2. second",
        "",
        "> npm run report  ",
        "",
        "> Quoted <!channel> & <at id=all></at>",
      ].join("\n");
    expect(dingtalk!.markdown).toEqual({ title: "daily-report: completed", text: `#### daily-report: completed\n\n${body("npm test")}` });
    expect(wecom!.markdown).toEqual({ content: `**daily-report: completed**\n\n${body("`npm test`")}` });
  });

  it("a failure message's error block keeps a fence longer than the backticks inside it", async () => {
    for (const format of ["discord", "feishu"] as const) {
      peer = await startWebhookReceiver();
      const target: WebhookTarget = { kind: "webhook", url: peer.url, format, headers: {} };
      await sendWebhook(target, { ...message, kind: "run.failed", result: "", error: "exit 2: ``` broke" }, "delivery-1", {
        now: () => NOW,
      });
      const body = JSON.parse(peer.requests[0]!.body) as Record<string, any>;
      const text: string = format === "discord" ? body.content : body.card.elements[0].content;
      expect(text, format).toContain("````\nexit 2: ``` broke\n````");
      await peer.close();
      peer = undefined;
    }
  });
});

describe("chat formats: refusals the services report with HTTP 200", () => {
  const answer = (body: unknown): ReceiverStep => ({
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

  it("a bad signature or missing keyword is permanent", async () => {
    for (const [format, body] of [
      ["feishu", { code: 19021, msg: "sign match fail or timestamp is not within one hour from current time" }],
      ["dingtalk", { errcode: 310000, errmsg: "keywords not in content" }],
      ["wecom", { errcode: 93000, errmsg: "invalid webhook url" }],
    ] as const) {
      const err = await deliver(format, { steps: [answer(body)] }).catch((e: unknown) => e);
      expect(err, format).toBeInstanceOf(DeliveryError);
      expect((err as DeliveryError).permanent, format).toBe(true);
      expect((err as DeliveryError).reason).toContain(`${format} refused the message: code ${Object.values(body)[0]}`);
      await peer?.close();
      peer = undefined;
    }
  });

  it("a rate limit is temporary", async () => {
    for (const [format, body] of [
      ["feishu", { code: 11232, msg: "frequency limited" }],
      ["dingtalk", { errcode: 130101, errmsg: "send too fast" }],
      ["wecom", { errcode: 45009, errmsg: "api freq out of limit" }],
    ] as const) {
      const err = await deliver(format, { steps: [answer(body)] }).catch((e: unknown) => e);
      expect((err as DeliveryError).permanent, format).toBe(false);
      await peer?.close();
      peer = undefined;
    }
  });

  it("success answers pass", async () => {
    const { sent } = await deliver("feishu", { steps: [answer({ code: 0, msg: "success", data: {} })] });
    expect(sent.status).toBe(200);
  });
});

describe("splitMessage and truncateUtf8", () => {
  it("never splits a surrogate pair and loses nothing but the whitespace at a cut", () => {
    const text = "😀".repeat(3000);
    const parts = splitMessage(text, 2000);
    expect(parts.join("")).toBe(text);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(2000);
  });

  it("leaves short text alone", () => {
    expect(splitMessage("short", 2000)).toEqual(["short"]);
    expect(truncateUtf8("short", 10)).toBe("short");
  });
});
