import { createHash } from "node:crypto";
import { z } from "zod";
import { describeValue, expected, httpURL, oneOf, text } from "../config/schema.js";
import { formatPath } from "../config/yaml-errors.js";
import { TEMPLATE_PLACEHOLDERS, unknownTemplatePlaceholders } from "./render.js";

export const WEBHOOK_FORMATS = ["json", "slack", "discord", "feishu", "dingtalk", "wecom"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

export interface EmailTarget {
  kind: "email";
  to: string[];
  cc: string[];
  bcc: string[];
  /** Template; undefined: "[countd] {{job.name}} {{status}} {{date}}". */
  subject?: string;
  /** Globs relative to the workspace, resolved after the run. */
  attach: string[];
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
  z.email({ pattern: z.regexes.html5Email, error: (issue) => `expected an email address like "ops@example.com", got ${describeValue(issue.input)}` });

const addresses = () => z.array(address(), expected("a list of email addresses"));

const attachPattern = () =>
  text().refine((pattern) => !/^([/\\~]|[A-Za-z]:)/.test(pattern) && !pattern.split(/[/\\]/).includes(".."), {
    error: (issue) => `expected a path or glob inside the workspace like "reports/*.csv", got ${describeValue(issue.input)}`,
  });

const subjectTemplate = () =>
  text().superRefine((subject, ctx) => {
    for (const placeholder of unknownTemplatePlaceholders(subject)) {
      ctx.addIssue({
        code: "custom",
        message: `unknown placeholder ${placeholder} (known: ${TEMPLATE_PLACEHOLDERS.map((name) => `{{${name}}}`).join(", ")})`,
      });
    }
  });

const emailSchema = z.strictObject(
  {
    to: addresses().min(1, "expected at least one address").describe("Recipients."),
    cc: addresses().default([]).describe("Copy recipients."),
    bcc: addresses().default([]).describe("Blind copy recipients."),
    subject: subjectTemplate()
      .optional()
      .describe('Subject template: {{job.name}}, {{date}}, {{time}}, {{status}}, {{run.id}}. Default: "[countd] {{job.name}} {{status}} {{date}}".'),
    attach: z
      .array(attachPattern(), expected("a list of paths or globs"))
      .default([])
      .describe('Workspace files to attach, as paths or globs like "reports/*.csv", matched after the run.'),
  },
  expected("a mapping with to: and optionally cc:, bcc:, subject:, attach:"),
);

/** Set by countd on every request; a target header of the same name would break the request or its signature. */
const RESERVED_HEADERS = ["content-type", "content-length", "host", "connection", "transfer-encoding", "webhook-id", "webhook-timestamp", "webhook-signature"];

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

/** Empty counts as not given: `${VAR:-}` is how a file says "sign only if the secret is set". */
const optionalSecret = () =>
  z.preprocess((v) => (v === "" ? undefined : v), z.string("expected the secret as a string").optional());

const webhookSchema = z
  .strictObject(
    {
      url: httpURL.describe("Where to POST; redirects are not followed."),
      secret: optionalSecret().describe(
        'json: a Standard Webhooks secret "whsec_…"; feishu: the bot\'s signing secret; dingtalk: the robot\'s "SEC…" secret. Usually ${VAR}.',
      ),
      format: oneOf(WEBHOOK_FORMATS).default("json").describe("Message shape: json (signed, Standard Webhooks), slack, discord, feishu, dingtalk, wecom."),
      headers: z
        .record(z.string(), headerValue(), expected("a mapping of header names to values"))
        .superRefine((headers, ctx) => {
          for (const name of Object.keys(headers)) {
            const problem = headerNameProblem(name);
            if (problem) ctx.addIssue({ code: "custom", path: [name], message: problem });
          }
        })
        .default({})
        .describe("Extra request headers."),
    },
    expected("a mapping with url: and optionally secret:, format:, headers:"),
  )
  .superRefine((webhook, ctx) => {
    const problem = secretProblem(webhook.format, webhook.secret);
    if (problem) ctx.addIssue({ code: "custom", path: ["secret"], message: problem });
  });

/**
 * Secret forms per format; the messages never show the value. json: Standard Webhooks `whsec_` +
 * base64 key. feishu: the signing secret shown by the bot's security settings, any string.
 * dingtalk: the `SEC…` string of the robot's 加签 setting. slack, discord and wecom do not sign:
 * their URL is the secret.
 */
function secretProblem(format: WebhookFormat, secret: string | undefined): string | undefined {
  if (secret === undefined) return undefined;
  switch (format) {
    case "json":
      return /^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)
        ? undefined
        : 'expected a Standard Webhooks secret: "whsec_" followed by the base64 key (the value is not shown here)';
    case "feishu":
      return secret.trim() === "" ? "expected the Feishu bot's signing secret" : undefined;
    case "dingtalk":
      return /^SEC\S+$/.test(secret) ? undefined : 'expected the DingTalk robot\'s signing secret, which starts with "SEC" (the value is not shown here)';
    default:
      return `${format} webhooks are not signed (the URL is the secret): remove secret`;
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
        message: given.length === 0 ? 'expected a delivery target: "email:" or "webhook:"' : "one target per list item: put email: and webhook: in separate items",
      });
    }
  })
  .transform((item): DeliveryTarget => (item.email ? { kind: "email", ...item.email } : { kind: "webhook", ...item.webhook! }));

/** A job's `deliver:` or `on_failure:`, or countd.yaml's `heartbeat.deliver:`. */
export const deliveryTargetsSchema = z.array(deliveryTargetSchema, expected("a list of delivery targets")).default([]);

/** Validated targets, or an Error with one line per problem: `deliver[0].email.to[1]: expected …`. */
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
 */
export function targetKey(target: DeliveryTarget): string {
  if (target.kind === "email") {
    const { to, cc, bcc, subject, attach } = target;
    return `email-${digest({ to: sorted(to), cc: sorted(cc), bcc: sorted(bcc), subject, attach })}`;
  }
  const host = new URL(target.url).hostname.toLowerCase().replace(/[^a-z0-9.-]+/g, "-").replace(/^[.-]+|[.-]+$/g, "") || "host";
  return `webhook-${host}-${digest({ url: target.url, format: target.format, headers: sorted(Object.keys(target.headers).map((name) => name.toLowerCase())) })}`;
}

/** For logs and `countd outbox`: who receives it, without secrets (a webhook URL's path and query often hold one). */
export function describeTarget(target: DeliveryTarget): string {
  if (target.kind === "email") {
    const all = [...target.to, ...target.cc, ...target.bcc];
    return `email to ${all[0]}${all.length > 1 ? ` and ${all.length - 1} more` : ""}`;
  }
  return `${target.format} webhook at ${new URL(target.url).origin}`;
}

const sorted = (values: readonly string[]) => [...values].sort();

function digest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 12);
}
