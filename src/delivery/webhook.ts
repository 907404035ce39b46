import { createHmac } from "node:crypto";
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import ms from "ms";
import { Webhook } from "standardwebhooks";
import { retryAfterMs } from "../providers/errors.js";
import { DeliveryError } from "./errors.js";
import { chatRequests, refusalInBody } from "./formats.js";
import type { ApprovalRequest, DeliveryMessage } from "./message.js";
import type { WebhookTarget } from "./targets.js";

export const WEBHOOK_TIMEOUT_MS = 15_000;
/**
 * What is read of an answer's body: enough for a chat service's JSON refusal and the excerpt an
 * error shows. The rest is never read, so a receiver answering a huge or endless body costs nothing.
 */
export const RESPONSE_EXCERPT_BYTES = 4096;

export interface SendWebhookOptions {
  /** Per request, the answer's body included. */
  timeoutMs?: number;
  now?: () => Date;
}

/**
 * Delivers `message` to a webhook target in its format. json is the Standard Webhooks form:
 * `webhook-id` is the delivery id, so a resend after a crash carries the same id and the receiver
 * can drop it. Throws a DeliveryError saying whether another attempt could succeed.
 */
export async function sendWebhook(
  target: WebhookTarget,
  message: DeliveryMessage,
  deliveryId: string,
  opts: SendWebhookOptions = {},
): Promise<{ status: number }> {
  const now = opts.now?.() ?? new Date();
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const requests = webhookRequests(target, message, deliveryId, now);
  let status = 0;
  for (const [index, request] of requests.entries()) {
    const part = requests.length > 1 ? ` (message part ${index + 1} of ${requests.length}; a retry sends every part again)` : "";
    try {
      status = await post(target, request, timeoutMs, now);
    } catch (err) {
      const failure = err instanceof DeliveryError ? err : new DeliveryError(String(err), { permanent: false, cause: err });
      throw new DeliveryError(redact(`${failure.reason}${part}`, target), {
        permanent: failure.permanent,
        status: failure.status,
        retryAfterMs: failure.retryAfterMs,
        disableTarget: failure.disableTarget,
        cause: failure.cause,
      });
    }
  }
  return { status };
}

/** The body receivers of the json format get (a test: `type`, `job`, `result` only); `error` and `lastToolCalls` only for a failed run, `failing` for a repeated failure and a recovery, `failedChecks` for an answer delivered flagged, `approval` for an approval request. */
function jsonBody(message: DeliveryMessage): string {
  const { kind, job, run, result, output, error, lastToolCalls, failing, failedChecks, approval } = message;
  // No run stands behind a test: a receiver keyed on run.id must not find one to act on.
  if (kind === "test") return JSON.stringify({ type: kind, job, result });
  return JSON.stringify({
    type: kind,
    job,
    run,
    result,
    ...(output !== undefined ? { output } : {}),
    ...(error !== undefined ? { error } : {}),
    ...(lastToolCalls ? { lastToolCalls } : {}),
    ...(failing ? { failing } : {}),
    ...(failedChecks ? { failedChecks } : {}),
    ...(approval ? { approval: approvalBody(approval) } : {}),
  });
}

/**
 * The call that waits, in the shape `countd approvals --json` and the API show (snake_case), with
 * the signed answer links while the daemon serves a console: a receiver may follow them, or
 * offer them to a person, and neither opens anything else.
 */
function approvalBody(approval: ApprovalRequest): Record<string, unknown> {
  const { id, tool, rule, reasoning, askedAt, expiresAt, onTimeout, links } = approval;
  return {
    id,
    tool,
    arguments: approval.arguments,
    rule,
    reasoning,
    asked_at: askedAt,
    expires_at: expiresAt,
    on_timeout: onTimeout,
    ...(links ? { approve_url: links.approve, deny_url: links.deny } : {}),
  };
}

export interface WebhookRequest {
  url: string;
  body: string;
  headers?: Record<string, string>;
}

/** The requests a delivery makes, in order, as of `now`: one in the json format, one per part in a chat preset's. */
export function webhookRequests(target: WebhookTarget, message: DeliveryMessage, deliveryId: string, now: Date): WebhookRequest[] {
  return target.format === "json" || target.format === "output"
    ? [signedJson(target, message, deliveryId, now)]
    : chatRequests(target, target.format, message, now);
}

/** The headers every request carries besides a request's own (webhook-id and the like). */
export function webhookHeaders(target: WebhookTarget, request: WebhookRequest): Record<string, string> {
  return { "content-type": "application/json", "user-agent": "countd", ...target.headers, ...request.headers };
}

/** webhook-id, webhook-timestamp (unix seconds) and, with a secret, webhook-signature `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`. */
function signedJson(target: WebhookTarget, message: DeliveryMessage, id: string, now: Date): WebhookRequest {
  // `output` sends a typed answer alone; a message without one (a failure, a test) goes in the json form, so it is not lost.
  const body = target.format === "output" && message.output !== undefined ? JSON.stringify(message.output) : jsonBody(message);
  const headers: Record<string, string> = { "webhook-id": id, "webhook-timestamp": String(Math.floor(now.getTime() / 1000)) };
  if (target.secret) headers["webhook-signature"] = standardSignature(target.secret, `${id}.${headers["webhook-timestamp"]}.${body}`);
  return { url: target.url, body, headers };
}

/** HMAC keys by secret: a secret is decoded once, not per delivery. */
const signingKeys = new Map<string, Buffer>();

/**
 * Standard Webhooks' `v1,<signature>`, as standardwebhooks' Webhook.sign makes it, hashed by
 * node:crypto: the library hashes in plain JavaScript, a twentieth of a delivery's CPU. The library
 * still reads each secret first, so a secret it refuses throws its error as before; for every
 * secret it takes, Buffer's base64 decoding gives the same key.
 */
function standardSignature(secret: string, signed: string): string {
  let key = signingKeys.get(secret);
  if (!key) {
    new Webhook(secret);
    key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
    signingKeys.set(secret, key);
  }
  return `v1,${createHmac("sha256", key).update(signed).digest("base64")}`;
}

/**
 * Kept-alive connections, one pool per scheme. An idle one is closed after 4 s (fetch's pool does
 * the same), before a receiver's own idle timeout (often 5 s) could close it under a request.
 */
const agents = { http: new HttpAgent({ keepAlive: true, timeout: 4_000 }), https: new HttpsAgent({ keepAlive: true, timeout: 4_000 }) };

/** What came back: the status, the headers and at most RESPONSE_EXCERPT_BYTES of the body. */
interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

class TimeoutError extends Error {
  override name = "TimeoutError";
}

/**
 * One POST through node:http: fetch's web streams, Request and Headers objects cost more CPU per
 * delivery than everything countd adds (a CPU profile of the outbox bench). node:http follows no
 * redirect; a 3xx comes back as it is.
 */
async function post(target: WebhookTarget, request: WebhookRequest, timeoutMs: number, now: Date): Promise<number> {
  const url = new URL(request.url);
  const origin = url.origin;
  let answer: Answer;
  try {
    answer = await exchange(
      url,
      { ...webhookHeaders(target, request), "content-length": String(Buffer.byteLength(request.body)) },
      request.body,
      timeoutMs,
    );
  } catch (err) {
    if (err instanceof TimeoutError) {
      throw new DeliveryError(`no answer from ${origin} within ${ms(timeoutMs, { long: true })}`, { permanent: false, cause: err });
    }
    const code = (err as NodeJS.ErrnoException).code;
    throw new DeliveryError(`could not reach ${origin}: ${code ?? (err as Error).message}`, { permanent: false, cause: err });
  }
  const { status, text } = answer;
  if (status >= 200 && status < 300) {
    const refusal = target.format === "json" || target.format === "output" ? undefined : refusalInBody(target.format, text);
    if (refusal) throw refusal;
    return status;
  }
  throw statusError(origin, answer, now);
}

/**
 * Sends `body` and reads the answer's first RESPONSE_EXCERPT_BYTES within `timeoutMs`; a longer
 * body is not read further: its connection is closed, so a huge or endless one costs nothing.
 */
function exchange(url: URL, headers: Record<string, string>, body: string, timeoutMs: number): Promise<Answer> {
  const https = url.protocol === "https:";
  return new Promise((resolve, reject) => {
    const req = (https ? httpsRequest : httpRequest)(url, { method: "POST", headers, agent: https ? agents.https : agents.http });
    let timedOut: TimeoutError | undefined;
    const timer = setTimeout(() => req.destroy((timedOut = new TimeoutError("timed out"))), timeoutMs);
    // The answer's stream may fail with its own error as the request is cut short: the timeout is what happened.
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(timedOut ?? err);
    };
    req.on("error", fail);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      let length = 0;
      const done = () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString("utf8");
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
      };
      res.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        length += chunk.length;
        if (length < RESPONSE_EXCERPT_BYTES) return;
        res.destroy();
        done();
      });
      res.on("end", done);
      res.on("error", fail);
    });
    req.end(body);
  });
}

function statusError(origin: string, { status, headers, text }: Answer, now: Date): DeliveryError {
  const said = text.replace(/\s+/g, " ").trim().slice(0, 200);
  const answered = `${origin} answered HTTP ${status}${said ? `: ${said}` : ""}`;
  if (status >= 300 && status < 400) {
    const location = headers.location;
    const to = location ? ` to ${safeOrigin(location, origin)}` : "";
    return new DeliveryError(
      `${origin} answered HTTP ${status}, a redirect${to}; redirects are not followed: set the webhook url to the final address`,
      {
        permanent: true,
        status,
      },
    );
  }
  if (status === 410) {
    return new DeliveryError(`${answered} (gone): the webhook no longer exists; countd stops sending to this target`, {
      permanent: true,
      status,
      disableTarget: true,
    });
  }
  const temporary = status === 408 || status === 425 || status === 429 || status >= 500 || status < 200;
  const wait = status === 429 || status === 503 ? retryAfterMs(headers, now.getTime()) : undefined;
  return new DeliveryError(answered, { permanent: !temporary, status, retryAfterMs: wait });
}

/** A Location may carry a token too; only its origin is shown. */
function safeOrigin(location: string, base: string): string {
  try {
    return new URL(location, base).origin;
  } catch {
    return "an invalid address";
  }
}

const CREDENTIAL_HEADER = /auth|token|key|secret|sig|cookie|pass/i;

/**
 * Strips what must never reach a log or `countd outbox`: the secret, credential-like header
 * values, and the token-like parts of the URL (Slack, DingTalk and WeCom URLs carry their key).
 */
function redact(text: string, target: WebhookTarget): string {
  const url = new URL(target.url);
  const secrets = [
    target.secret,
    ...Object.entries(target.headers)
      .filter(([name]) => CREDENTIAL_HEADER.test(name))
      .map(([, value]) => value),
    ...url.pathname.split("/"),
    ...[...url.searchParams.values()],
  ].filter((value): value is string => value !== undefined && value.length >= 8);
  return secrets.reduce((out, secret) => out.split(secret).join("[redacted]"), text);
}
