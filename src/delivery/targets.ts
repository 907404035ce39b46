import { createHash } from "node:crypto";
import * as z from "zod";
import { describeValue, expected, httpURL, oneOf, text } from "../config/fields.js";
import { formatPath } from "../config/yaml-errors.js";
import { TEMPLATE_PLACEHOLDERS, unknownTemplatePlaceholders } from "./render.js";

export const WEBHOOK_FORMATS = ["json", "output", "slack", "discord", "feishu", "dingtalk", "wecom"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/**
 * Targets are kept as written: addresses, the webhook URL, secret and header values may hold
 * `${VAR}` / `${VAR:-default}` references, which resolveTarget (secrets.ts) fills in just before
 * sending, so no secret is ever written to the outbox.
 */
/** What a mail may end with: `usage`, a line with the run's tokens, cost and duration. */
export const EMAIL_FOOTERS = ["usage"] as const;
export type EmailFooter = (typeof EMAIL_FOOTERS)[number];

export interface EmailTarget {
  kind: "email";
  to: string[];
  cc: string[];
  bcc: string[];
  /** Template; undefined: "[countd] {{job.name}} {{status}} {{date}}". */
  subject?: string;
  /** Globs relative to the workspace, resolved after the run. */
  attach: string[];
  /** undefined: the mail ends with the answer. */
  footer?: EmailFooter;
}

export interface WebhookTarget {
  kind: "webhook";
  url: string;
  /** json: `whsec_…` (Standard Webhooks); feishu: the bot's signing secret; dingtalk: `SEC…`. */
  secret?: string;
  format: WebhookFormat;
  headers: Record<string, string>;
}

export type DeliveryTarget = EmailTarget | WebhookTarget;

/** HTML5's rule: permissive enough for `root@localhost`, strict enough to catch a typo. */
const address = () =>
  z.email({
    pattern: z.regexes.html5Email,
    error: (issue) => `expected an email address like "ops@example.com", got ${describeValue(issue.input)}`,
  });

/**
 * A value holding `${VAR}` references is kept as written, so secrets never reach the state
 * directory: it is checked against the environment by secrets.ts (at load time and at send time),
 * not here. Any other value must have the literal's form.
 */
const referenceOr = (literal: z.ZodType<string>, what: string) =>
  z.union([z.string().regex(/\$\{/, { abort: true }), literal], expected(what));

const hasReference = (value: string) => value.includes("${");

/** A list of at least `least` addresses; a single one stands for a list of one (`to: ops@example.com`). */
const addresses = (least = 0) => {
  const one = referenceOr(address(), 'an email address like "ops@example.com"');
  const list = z.array(one).min(least, "expected at least one address");
  return z
    .union([one, list], expected("an email address or a list of them"))
    .transform((value) => (Array.isArray(value) ? value : [value]));
};

const attachPattern = () =>
  text().refine((pattern) => !/^([/\\~]|[A-Za-z]:)/.test(pattern) && !pattern.split(/[/\\]/).includes(".."), {
    error: (issue) => `expected a path or glob inside the workspace like "reports/*.csv", got ${describeValue(issue.input)}`,
  });

const subjectTemplate = () =>
  text().superRefine((subject, ctx) => {
    for (const placeholder of unknownTemplatePlaceholders(subject)) {
      ctx.addIssue({
        code: "custom",
        message: `unknown placeholder ${placeholder} (known: ${TEMPLATE_PLACEHOLDERS.map((name) => `{{${name}}}`).join(", ")}, {{output.…}})`,
      });
    }
  });

const emailSchema = z.strictObject(
  {
    to: addresses(1).describe("Recipients: an address, or a list of them."),
    cc: addresses().default([]).describe("Copy recipients."),
    bcc: addresses().default([]).describe("Blind copy recipients."),
    subject: subjectTemplate()
      .optional()
      .describe(
        'Subject template: {{job.name}}, {{date}}, {{time}}, {{status}}, {{run.id}}. Default: "[countd] {{job.name}} {{status}} {{date}}".',
      ),
    attach: z
      .array(attachPattern(), expected("a list of paths or globs"))
      .default([])
      .describe('Workspace files to attach, as paths or globs like "reports/*.csv", matched after the run.'),
    footer: oneOf(EMAIL_FOOTERS)
      .optional()
      .describe("usage: end the mail with a line giving the run's tokens (input, cached, output), cost and duration. Default: no footer."),
  },
  expected("a mapping with to: and optionally cc:, bcc:, subject:, attach:, footer:"),
);

/** Set by countd on every request; a target header of the same name would break the request or its signature. */
const RESERVED_HEADERS = [
  "content-type",
  "content-length",
  "host",
  "connection",
  "transfer-encoding",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
];

/** Checked on the whole mapping: zod would report a bad record key with the record's own message. */
function headerNameProblem(name: string): string | undefined {
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) return `expected an HTTP header name, got ${JSON.stringify(name)}`;
  if (RESERVED_HEADERS.includes(name.toLowerCase())) return `${name} is set by countd and cannot be given`;
  return undefined;
}

// Values are never quoted back: a header is where an API token usually sits.
const headerValue = () =>
  z
    .union([z.string(), z.number().transform(String)], expected("a header value (a string)"))
    .refine((value) => !/[\r\n\0]/.test(value), "a header value cannot hold a line break or NUL");

/** Empty counts as not given, as does a `${VAR:-}` that comes out empty at send time: "sign only if the secret is set". */
const optionalSecret = () => z.preprocess((v) => (v === "" ? undefined : v), z.string("expected the secret as a string").optional());

/** Formats that sign their requests, and so take a secret. */
const SIGNED_FORMATS: readonly WebhookFormat[] = ["json", "output", "feishu", "dingtalk"];

const webhookSchema = z
  .strictObject(
    {
      url: referenceOr(httpURL, 'an http(s) URL like "https://hooks.example.com/countd"').describe(
        "Where to POST; redirects are not followed. May hold ${VAR} references (filled in at send time), e.g. for a URL carrying a token.",
      ),
      secret: optionalSecret().describe(
        'json: a Standard Webhooks secret "whsec_…"; feishu: the bot\'s signing secret; dingtalk: the robot\'s "SEC…" secret. Usually ${VAR}.',
      ),
      format: oneOf(WEBHOOK_FORMATS)
        .default("json")
        .describe(
          "Message shape: json (signed, Standard Webhooks), output (a typed answer's JSON alone as the body, signed the same way), slack, discord, feishu, dingtalk, wecom.",
        ),
      headers: z
        .record(z.string(), referenceOr(headerValue(), "a header value (a string)"), expected("a mapping of header names to values"))
        .superRefine((headers, ctx) => {
          for (const name of Object.keys(headers)) {
            const problem = headerNameProblem(name);
            if (problem) ctx.addIssue({ code: "custom", path: [name], message: problem });
          }
        })
        .prefault({})
        .describe("Extra request headers; values may hold ${VAR} references, filled in at send time."),
    },
    expected("a mapping with url: and optionally secret:, format:, headers:"),
  )
  .superRefine(({ format, secret }, ctx) => {
    if (secret === undefined) return;
    const problem = !SIGNED_FORMATS.includes(format)
      ? unsignedProblem(format)
      : hasReference(secret)
        ? undefined
        : secretProblem(format, secret)?.concat(" (the value is not shown here)");
    if (problem) ctx.addIssue({ code: "custom", path: ["secret"], message: problem });
  });

const unsignedProblem = (format: WebhookFormat) => `${format} webhooks are not signed (the URL is the secret): remove secret`;

/**
 * Secret forms per format; the messages never show the value. json: Standard Webhooks `whsec_` +
 * base64 key. feishu: the signing secret shown by the bot's security settings, any string.
 * dingtalk: the `SEC…` string of the robot's 加签 setting. slack, discord and wecom do not sign:
 * their URL is the secret.
 */
function secretProblem(format: WebhookFormat, secret: string): string | undefined {
  switch (format) {
    case "json":
    case "output":
      return /^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)
        ? undefined
        : 'expected a Standard Webhooks secret: "whsec_" followed by the base64 key';
    case "feishu":
      return secret.trim() === "" ? "expected the Feishu bot's signing secret" : undefined;
    case "dingtalk":
      return /^SEC\S+$/.test(secret) ? undefined : 'expected the DingTalk robot\'s signing secret, which starts with "SEC"';
    default:
      return unsignedProblem(format);
  }
}

/** Where a target may hold `${VAR}` references; see filledInProblem. */
export type ReferenceField = "address" | "url" | "secret" | "header";

/**
 * What is wrong with a value once its `${VAR}` references are filled in, or undefined. The
 * message never shows the value: it came from the environment, where secrets are.
 */
export function filledInProblem(field: ReferenceField, value: string, format: WebhookFormat): string | undefined {
  switch (field) {
    case "address":
      return address().safeParse(value).success ? undefined : 'expected an email address like "ops@example.com"';
    case "url":
      return httpURL.safeParse(value).success ? undefined : 'expected an http(s) URL like "https://hooks.example.com/countd"';
    case "header":
      return /[\r\n\0]/.test(value) ? "a header value cannot hold a line break or NUL" : undefined;
    case "secret":
      return value === "" ? undefined : secretProblem(format, value);
  }
}

/** One item of `deliver:` / `on_failure:` as written in YAML: `- email: {…}` or `- webhook: {…}`. */
export const deliveryTargetSchema = z
  .strictObject(
    {
      email: emailSchema.optional().describe("Send the answer by email."),
      webhook: webhookSchema.optional().describe("POST the answer to a webhook."),
    },
    expected('a delivery target: "email:" or "webhook:"'),
  )
  .superRefine((item, ctx) => {
    const given = Object.keys(item).filter((key) => item[key as keyof typeof item] !== undefined);
    if (given.length !== 1) {
      ctx.addIssue({
        code: "custom",
        message:
          given.length === 0
            ? 'expected a delivery target: "email:" or "webhook:"'
            : "one target per list item: put email: and webhook: in separate items",
      });
    }
  })
  .transform((item): DeliveryTarget => (item.email ? { kind: "email", ...item.email } : { kind: "webhook", ...item.webhook! }));

/** A job's `deliver:` or `on_failure:`, or countd.yaml's `heartbeat.deliver:`. */
// prefault rather than default: the JSON Schema keeps a default only where the input is not transformed.
export const deliveryTargetsSchema = z.array(deliveryTargetSchema, expected("a list of delivery targets")).prefault([]);

/**
 * Validated targets, or an Error with one line per problem: `deliver[0].email.to[1]: expected …`.
 * `${VAR}` references are only checked for their presence here; referenceProblems (secrets.ts)
 * checks them against an environment.
 */
export function parseDeliveryTargets(input: unknown, field: string): DeliveryTarget[] {
  const parsed = deliveryTargetsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.flatMap((issue) =>
    issue.code === "unrecognized_keys"
      ? issue.keys.map((key) => `${formatPath([field, ...issue.path, key])}: unknown key`)
      : [`${formatPath([field, ...issue.path])}: ${issue.message}`],
  );
  throw new Error(lines.join("\n"));
}

/**
 * A short id that stays the same for the same target across restarts and edits elsewhere in the
 * job file; part of delivery ids, which end up in Message-ID and file names, so only
 * `[a-z0-9.-]`. The secret and header values are left out, so rotating a secret keeps the id.
 * Taken from the target as written: a `${VAR}` URL keeps its key whatever the variable holds.
 */
export function targetKey(target: DeliveryTarget): string {
  let key = keys.get(target);
  if (key === undefined) keys.set(target, (key = keyOf(target)));
  return key;
}

/**
 * Each target's key, computed once: the outbox asks for it at every enqueue, attempt and outcome,
 * and a URL parse and a SHA-256 each time cost 22 µs of each delivery in a profile of the outbox
 * bench. Targets are never changed once parsed, so the object itself is the cache's key.
 */
const keys = new WeakMap<DeliveryTarget, string>();

function keyOf(target: DeliveryTarget): string {
  if (target.kind === "email") {
    // footer is left out of the JSON when not set, so the keys of targets written before it stay the same.
    const { to, cc, bcc, subject, attach, footer } = target;
    return `email-${digest({ to: sorted(to), cc: sorted(cc), bcc: sorted(bcc), subject, attach, footer })}`;
  }
  const host =
    keyHost(target.url)
      .toLowerCase()
      .replace(/[^a-z0-9.-]+/g, "-")
      .replace(/^[.-]+|[.-]+$/g, "") || "host";
  return `webhook-${host}-${digest({ url: target.url, format: target.format, headers: sorted(Object.keys(target.headers).map((name) => name.toLowerCase())) })}`;
}

/**
 * For logs and `countd outbox`: who receives it, without secrets. A webhook is shown by its whole
 * URL (two hooks on one host differ in their path), with what may be a secret replaced by
 * `[redacted:<4 hex of its SHA-256>]`, which still tells two tokens apart: a password, the
 * last path segment of a chat format whose URL is its secret (Slack, Discord, Feishu), query
 * values named like a credential (`key`, `access_token`, …), and any long token-like part.
 * `${VAR}` references are shown as written: the value is not known here.
 */
export function describeTarget(target: DeliveryTarget): string {
  if (target.kind === "email") {
    const all = [...target.to, ...target.cc, ...target.bcc];
    return `email to ${all[0]}${all.length > 1 ? ` and ${all.length - 1} more` : ""}`;
  }
  return `${target.format} webhook at ${shownURL(target.url, target.format)}`;
}

/** Formats whose URL path ends in the secret token. */
const TOKEN_IN_PATH: readonly WebhookFormat[] = ["slack", "discord", "feishu"];
const CREDENTIAL_NAME = /auth|token|key|secret|sig|pass|code|session/i;
/** A URL that is one `${VAR}` (the usual form for a Slack or WeCom URL) is named by the variable. */
const LEADING_REFERENCE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}/;
const ORIGIN = /^([a-z][a-z0-9+.-]*:\/\/)(?:([^/?#@]*)@)?([^/?#]*)/i;

function keyHost(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return LEADING_REFERENCE.exec(url)?.[1] ?? "";
  }
}

function shownURL(url: string, format: WebhookFormat): string {
  const lead = LEADING_REFERENCE.exec(url);
  const origin = lead ? undefined : ORIGIN.exec(url);
  if (!lead && !origin) return "a URL that is not shown";
  const shownOrigin = lead ? lead[0] : `${origin![1]}${shownUserinfo(origin![2])}${origin![3]}`;
  const [, path = "", query, fragment] = /^([^?#]*)(\?[^#]*)?(#.*)?$/.exec(url.slice((lead ?? origin)![0].length)) ?? [];
  const segments = path.split("/");
  const last = segments.length - 1 - [...segments].reverse().findIndex((segment) => segment !== "");
  const shownPath = segments
    .map((segment, index) => ((index === last && TOKEN_IN_PATH.includes(format)) || tokenLike(segment) ? redacted(segment) : segment))
    .join("/");
  const shownQuery = query
    ? `?${query
        .slice(1)
        .split("&")
        .map((pair) => {
          const [name = "", ...rest] = pair.split("=");
          const value = rest.join("=");
          return rest.length > 0 && (CREDENTIAL_NAME.test(name) || tokenLike(value)) ? `${name}=${redacted(value)}` : pair;
        })
        .join("&")}`
    : "";
  return `${shownOrigin}${shownPath}${shownQuery}${fragment ? `#${redacted(fragment.slice(1))}` : ""}`;
}

/** `user:password@` keeps the user; a lone `token@` is all secret. */
function shownUserinfo(userinfo: string | undefined): string {
  if (userinfo === undefined) return "";
  const colon = userinfo.indexOf(":");
  return `${colon < 0 ? redacted(userinfo) : `${userinfo.slice(0, colon)}:${redacted(userinfo.slice(colon + 1))}`}@`;
}

/** Long, or mixing letters and digits at some length: how generated tokens look, and words do not. */
function tokenLike(part: string): boolean {
  if (part.includes("${")) return false;
  return part.length >= 24 || (part.length >= 12 && /\d/.test(part) && /[A-Za-z]/.test(part));
}

function redacted(part: string): string {
  return hasReference(part) || part === "" ? part : `[redacted:${createHash("sha256").update(part).digest("hex").slice(0, 4)}]`;
}

const sorted = (values: readonly string[]) => [...values].sort();

function digest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 12);
}
