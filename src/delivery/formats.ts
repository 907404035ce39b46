import { createHmac } from "node:crypto";
import { toDialect } from "./dialects.js";
import { DeliveryError } from "./errors.js";
import type { DeliveryMessage } from "./message.js";
import { messageMarkdown, messageTitle } from "./render.js";
import type { WebhookFormat, WebhookTarget } from "./targets.js";

export type ChatFormat = Exclude<WebhookFormat, "json" | "output">;

/** One POST of a chat format; the target's headers go with it. */
export interface ChatRequest {
  url: string;
  body: string;
}

export const DISCORD_MAX_CHARS = 2000;
export const WECOM_MAX_BYTES = 4096;
/** Feishu refuses request bodies over 20 KB; the text is cut so the whole body stays below. */
const FEISHU_MAX_BODY_BYTES = 19_000;
const TRUNCATED = "\n\n…(truncated)";

/**
 * The requests that deliver `message` in the service's own message shape, in order. Only Discord
 * needs several (2,000 characters per message); a retry sends them all again, since Discord has no
 * idempotency key and the outbox records a delivery as a whole.
 */
export function chatRequests(target: WebhookTarget, format: ChatFormat, message: DeliveryMessage, now: Date): ChatRequest[] {
  const title = messageTitle(message);
  // A chat message asks in short: the mail and the approval page show the call whole.
  const markdown = toDialect(messageMarkdown(message, { short: true }), format);
  switch (format) {
    case "slack":
      return [{ url: target.url, body: JSON.stringify({ text: `*${toDialect(title, "slack")}*\n\n${markdown}` }) }];
    case "discord":
      // A result quoting "@everyone" must not ping a whole server.
      return splitMessage(`**${title}**\n\n${markdown}`, DISCORD_MAX_CHARS).map((content) => ({
        url: target.url,
        body: JSON.stringify({ content, allowed_mentions: { parse: [] } }),
      }));
    case "feishu":
      return [{ url: target.url, body: feishuBody(title, markdown, target.secret, now) }];
    case "dingtalk":
      return [
        {
          url: target.secret ? dingtalkSignedUrl(target.url, target.secret, now) : target.url,
          body: JSON.stringify({ msgtype: "markdown", markdown: { title, text: `#### ${title}\n\n${markdown}` } }),
        },
      ];
    case "wecom":
      return [
        {
          url: target.url,
          body: JSON.stringify({
            msgtype: "markdown",
            markdown: { content: truncateUtf8(`**${title}**\n\n${markdown}`, WECOM_MAX_BYTES) },
          }),
        },
      ];
  }
}

/**
 * A Feishu message card holding one markdown element (a custom bot's `post` takes plain text
 * only), the title in its header. With a secret, `timestamp` (seconds) and `sign` =
 * base64(HMAC-SHA256 keyed with "timestamp\nsecret" over the empty string).
 */
function feishuBody(title: string, text: string, secret: string | undefined, now: Date): string {
  const build = (content: string) => {
    const timestamp = String(Math.floor(now.getTime() / 1000));
    const signature = secret ? { timestamp, sign: createHmac("sha256", `${timestamp}\n${secret}`).update("").digest("base64") } : {};
    const card = { header: { title: { tag: "plain_text", content: title } }, elements: [{ tag: "markdown", content }] };
    return JSON.stringify({ ...signature, msg_type: "interactive", card });
  };
  let body = build(text);
  // JSON escaping grows the body beyond the text; cut the text by the excess until it fits.
  for (let limit = Buffer.byteLength(text); Buffer.byteLength(body) > FEISHU_MAX_BODY_BYTES && limit > 0;) {
    limit = Math.max(0, limit - (Buffer.byteLength(body) - FEISHU_MAX_BODY_BYTES) - 64);
    body = build(truncateUtf8(text, limit));
  }
  return body;
}

/** DingTalk's signed URL: `timestamp` (ms) and `sign` = base64(HMAC-SHA256 keyed with the secret over "timestamp\nsecret"), URL-encoded. */
function dingtalkSignedUrl(url: string, secret: string, now: Date): string {
  const timestamp = String(now.getTime());
  const signed = new URL(url);
  signed.searchParams.set("timestamp", timestamp);
  signed.searchParams.set("sign", createHmac("sha256", secret).update(`${timestamp}\n${secret}`).digest("base64"));
  return signed.toString();
}

/** At most `maxBytes` of UTF-8, cut on a character boundary, with a note when anything was cut. */
export function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  let end = Math.max(0, maxBytes - Buffer.byteLength(TRUNCATED));
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.toString("utf8", 0, end) + TRUNCATED;
}

/**
 * Pieces of at most `limit` UTF-16 units, cut at a line break (else a space) in the second half
 * of a piece when there is one. A code block cut in two is closed and reopened so both halves
 * still render as code.
 */
export function splitMessage(text: string, limit: number): string[] {
  const fence = "```";
  // Room for the closing fence of this piece and the reopening one of the next.
  const room = limit - 2 * (fence.length + 1);
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = rest.lastIndexOf("\n", room);
    if (cut < room / 2) cut = rest.lastIndexOf(" ", room);
    if (cut < room / 2) cut = room;
    if (/[\uD800-\uDBFF]/.test(rest.charAt(cut - 1))) cut -= 1;
    let part = rest.slice(0, cut).trimEnd();
    rest = rest.slice(cut).replace(/^[ \n]/, "");
    if ((part.match(/^```/gm) ?? []).length % 2 === 1) {
      part += `\n${fence}`;
      rest = `${fence}\n${rest}`;
    }
    if (part !== "") parts.push(part);
  }
  if (rest.trim() !== "") parts.push(rest);
  return parts;
}

/** Codes the services answer (with HTTP 200) when a bot posts too often: worth another attempt. */
const RATE_LIMITED: Record<string, number[]> = { feishu: [11232], dingtalk: [130101], wecom: [45009] };

/**
 * Feishu, DingTalk and WeCom answer 200 also when they refuse a message and put the error in the
 * body; such a refusal (bad signature, missing keyword, IP not allowed, malformed message) would
 * be the same next time, so it is permanent, except for rate limits.
 */
export function refusalInBody(format: ChatFormat, responseText: string): DeliveryError | undefined {
  if (format !== "feishu" && format !== "dingtalk" && format !== "wecom") return undefined;
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(responseText) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof answer !== "object" || answer === null) return undefined;
  const code = format === "feishu" ? (answer.code ?? answer.StatusCode) : answer.errcode;
  if (typeof code !== "number" || code === 0) return undefined;
  const said = String((format === "feishu" ? (answer.msg ?? answer.StatusMessage) : answer.errmsg) ?? "").slice(0, 200);
  return new DeliveryError(`${format} refused the message: code ${code}${said ? ` ${JSON.stringify(said)}` : ""}`, {
    permanent: !RATE_LIMITED[format]!.includes(code),
  });
}
