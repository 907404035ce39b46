import { createHash } from "node:crypto";
import { mkdir, open, rename, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { basename, join, relative } from "node:path";
import type nodemailer from "nodemailer";
import type { Attachment, NodemailerError, SendMailOptions } from "nodemailer";
import { glob } from "tinyglobby";
import bytes from "bytes";
import type { AttachmentLimits, SmtpConfig } from "../config/schema.js";
import { silentLogger, type Logger } from "../log.js";
import { PathGuard, ToolRefusal } from "../tools/paths.js";
import { DeliveryError } from "./errors.js";
import type { DeliveryMessage } from "./message.js";
import { codeSpan, messageMarkdown, messageTitle, renderMarkdown, renderTemplate, usageFooter } from "./render.js";
import type { EmailTarget } from "./targets.js";
import { authCheck } from "./smtp-auth.js";
import { errorText } from "../text.js";

export const DEFAULT_SUBJECT = "[countd] {{job.name}} {{status}} {{date}}";

/** What a target without `subject:` gets: a check-in comes from the persona, not from a job called @heartbeat. */
function defaultSubject(message: DeliveryMessage): string {
  return message.kind === "heartbeat" && message.persona !== undefined ? `[${message.persona}] check-in {{date}}` : DEFAULT_SUBJECT;
}
const SMTP_TIMEOUT_MS = 30_000;

export interface Mailer {
  /**
   * Sends (or, without SMTP settings, writes) one message; resolves once the server accepted it
   * (or the file is in place). Throws a DeliveryError saying whether another attempt could succeed.
   */
  send(target: EmailTarget, message: DeliveryMessage, deliveryId: string, workspace: string): Promise<{ info: string }>;
  /**
   * The message as sending would make it, as .eml bytes, sent nowhere (a rehearsal's). Dated at the
   * run's end and with boundaries drawn from the delivery id, so the same message always renders
   * to the same bytes and a replay can compare them.
   */
  render(target: EmailTarget, message: DeliveryMessage, deliveryId: string, workspace: string): Promise<RenderedMail>;
  close(): void;
  /** No SMTP settings: messages are written as .eml files under `<stateDir>/mail/`. */
  readonly usesFiles: boolean;
}

/** A mail as sending would make it: its .eml bytes, and its subject and HTML body as its reader sees them. */
export interface RenderedMail {
  eml: Buffer;
  subject: string;
  html: string;
}

/** countd.yaml's `attachments:` defaults. */
export const DEFAULT_ATTACHMENT_LIMITS: AttachmentLimits = { maxFileBytes: 10 * 1024 * 1024, maxMessageBytes: 25 * 1024 * 1024 };

export function createMailer(opts: {
  smtp?: SmtpConfig;
  stateDir: string;
  timezone: string;
  attachments?: AttachmentLimits;
  log?: Logger;
}): Mailer {
  const { smtp } = opts;
  const from = smtp?.from ?? `countd <countd@${hostname()}>`;
  const limits = opts.attachments ?? DEFAULT_ATTACHMENT_LIMITS;
  const log = (opts.log ?? silentLogger).child({ component: "email" });
  const compose = (target: EmailTarget, message: DeliveryMessage, deliveryId: string, workspace: string) =>
    composeMail(target, message, deliveryId, workspace, { from, timezone: opts.timezone, limits, log });
  const files = onFirstSend((mailer) => mailer.createTransport({ streamTransport: true, buffer: true, newline: "unix" }));
  async function render(target: EmailTarget, message: DeliveryMessage, deliveryId: string, workspace: string): Promise<RenderedMail> {
    const mail = await compose(target, message, deliveryId, workspace);
    const fixed = {
      date: new Date(message.run.finishedAt),
      baseBoundary: createHash("sha256").update(deliveryId).digest("hex").slice(0, 16),
    };
    const eml = (await (await files.get()).sendMail({ ...mail, ...fixed })).message as Buffer;
    return { eml, subject: String(mail.subject ?? ""), html: String(mail.html ?? "") };
  }

  if (!smtp) {
    const transport = files;
    const folder = join(opts.stateDir, "mail");
    return {
      usesFiles: true,
      render,
      async send(target, message, deliveryId, workspace) {
        const mail = await compose(target, message, deliveryId, workspace);
        const info = await (await transport.get()).sendMail(mail);
        const file = join(folder, `${messageIdLocalPart(deliveryId)}.eml`);
        await mkdir(folder, { recursive: true });
        // Written aside and renamed, so a crash never leaves half a message under the final name.
        await writeFile(`${file}.tmp`, info.message as Buffer);
        await rename(`${file}.tmp`, file);
        return { info: file };
      },
      close: () => transport.close(),
    };
  }

  const transport = onFirstSend((mailer) =>
    mailer.createTransport({
      host: smtp.host,
      port: smtp.port,
      secure: smtp.secure,
      auth: smtp.user !== undefined ? { user: smtp.user, pass: smtp.password ?? "" } : undefined,
      pool: false,
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
    }),
  );
  const checkAuth = smtp.user !== undefined ? authCheck(smtp, SMTP_TIMEOUT_MS, log) : async () => {};
  return {
    usesFiles: false,
    render,
    async send(target, message, deliveryId, workspace) {
      const mail = await compose(target, message, deliveryId, workspace);
      const smtpTransport = await transport.get();
      try {
        // Beside the send, not before it: the check never delays a mail, and is over once the send is.
        const [info] = await Promise.all([smtpTransport.sendMail(mail), checkAuth()]);
        const rejected = info.rejected.length > 0 ? `; rejected: ${info.rejected.join(", ")}` : "";
        return { info: `${info.response} (accepted: ${info.accepted.join(", ")}${rejected})` };
      } catch (err) {
        const { permanent, reason } = classifySmtpError(err);
        const responseCode = (err as NodemailerError).responseCode;
        throw new DeliveryError(`mail server ${smtp.host}:${smtp.port}: ${reason}`, { permanent, responseCode, cause: err });
      }
    },
    close: () => {
      transport.close();
      files.close();
    },
  };
}

/** nodemailer is loaded, and the transport made, by the first send: a daemon that never mails never loads it. */
function onFirstSend<T extends { close(): void }>(create: (mailer: typeof nodemailer) => T): { get(): Promise<T>; close(): void } {
  let transport: T | undefined;
  return {
    async get() {
      const { default: mailer } = await import("nodemailer");
      // Assigned after the import, so two first sends at once still share one transport.
      return (transport ??= create(mailer));
    },
    close: () => transport?.close(),
  };
}

/** SMTP failures with no reply code that another attempt cannot fix: settings or the message itself. */
const PERMANENT_CODES = new Set(["ENOAUTH", "ECONFIG", "EENVELOPE", "EREQUIRETLS", "EMAXRECIPIENTS", "EFILEACCESS", "EURLACCESS"]);

/**
 * 5xx replies are permanent (nodemailer's `permanent`, which also treats 503 as temporary), 4xx
 * temporary; without a reply, a failure to connect or a dropped connection is temporary.
 */
export function classifySmtpError(err: unknown): { permanent: boolean; reason: string } {
  const error = err as NodemailerError;
  const reason = errorText(err);
  if (typeof error.permanent === "boolean") return { permanent: error.permanent, reason };
  if (typeof error.responseCode === "number") return { permanent: error.responseCode >= 500 && error.responseCode !== 503, reason };
  return { permanent: error.code !== undefined && PERMANENT_CODES.has(error.code), reason };
}

async function composeMail(
  target: EmailTarget,
  message: DeliveryMessage,
  deliveryId: string,
  workspace: string,
  opts: { from: string; timezone: string; limits: AttachmentLimits; log: Logger },
): Promise<SendMailOptions> {
  const request = message.kind === "approval.requested";
  // A request is no report: the target's attachments and subject were written for the run's answer.
  const { attachments, unmatched } = await resolveAttachments(request ? [] : target.attach, workspace, opts.limits);
  for (const pattern of unmatched) {
    opts.log.warn({ delivery: deliveryId, workspace, pattern }, "no file in the workspace matched an attachment pattern");
  }
  const notes = unmatched.map((pattern) => `_No file in the workspace matched the attachment pattern_ ${codeSpan(pattern)}`);
  // Below a rule, so the reader tells it apart from the answer.
  const footer = target.footer === "usage" ? ["---", usageFooter(message.run)] : [];
  const { html, text } = await renderMarkdown([messageMarkdown(message), ...notes, ...footer].join("\n\n"));
  const subject = request
    ? messageTitle(message)
    : renderTemplate(target.subject ?? defaultSubject(message), {
        job: message.job,
        runId: message.run.id,
        status: message.run.status,
        clock: { at: new Date(message.run.startedAt), timeZone: message.timezone ?? opts.timezone },
        ...(message.output !== undefined ? { output: message.output } : {}),
      });
  return {
    from: opts.from,
    to: target.to,
    cc: target.cc,
    bcc: target.bcc,
    subject,
    text,
    html: htmlDocument(html),
    messageId: `<${messageIdLocalPart(deliveryId)}@countd>`,
    headers: { "X-Countd-Job": message.job, "X-Countd-Run": message.run.id },
    attachments,
  };
}

/** A dot-atom of safe file-name characters, so it serves as Message-ID local part and .eml name. */
const PLAIN_ID = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/**
 * The delivery id itself when it is plain, which is what the outbox's ids are; any other id is
 * made plain and given a hash of the original, so distinct ids stay distinct and the same id
 * always yields the same Message-ID.
 */
export function messageIdLocalPart(deliveryId: string): string {
  if (PLAIN_ID.test(deliveryId)) return deliveryId;
  const plain = deliveryId.replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "") || "delivery";
  return `${plain}.${createHash("sha256").update(deliveryId).digest("hex").slice(0, 12)}`;
}

/**
 * The `attach:` globs, matched in the workspace now that the run is over. Symlinked files are
 * not matched (as with the file tools), and every match is checked by the same PathGuard the
 * file tools use, so a symlinked folder planted by the agent cannot mail out files from outside
 * the workspace. Sizes are checked against `limits` before anything is read (a sparse file
 * costs nothing on disk but its full size in the mail), and each file is read only up to the
 * size it had then.
 */
async function resolveAttachments(
  patterns: readonly string[],
  workspace: string,
  limits: AttachmentLimits,
): Promise<{ attachments: Attachment[]; unmatched: string[] }> {
  if (patterns.length === 0) return { attachments: [], unmatched: [] };
  const guard = new PathGuard({ workspace, restrictToWorkspace: true, readOnlyRoots: [] });
  const files = new Map<string, { name: string; shown: string; size: number }>();
  const unmatched: string[] = [];
  let total = 0;
  try {
    const root = await guard.workspace();
    for (const pattern of patterns) {
      const found = (
        await glob(pattern, { cwd: root, absolute: true, onlyFiles: true, followSymbolicLinks: false, expandDirectories: false })
      ).sort();
      if (found.length === 0) unmatched.push(pattern);
      for (const match of found) {
        const path = await guard.forRead(match);
        if (files.has(path)) continue;
        const shown = relative(root, match);
        const { size } = await stat(path);
        if (size > limits.maxFileBytes) {
          throw new DeliveryError(
            `attachment ${shown} is ${bytes(size)}, over the limit of ${bytes(limits.maxFileBytes)} per file (attachments.max_file_size in countd.yaml); nothing was sent`,
            { permanent: true },
          );
        }
        total += size;
        files.set(path, { name: basename(match), shown, size });
        if (total > limits.maxMessageBytes) {
          throw new DeliveryError(
            `the ${files.size} attachments matched so far come to ${bytes(total)}, over the limit of ${bytes(limits.maxMessageBytes)} per message (attachments.max_message_size in countd.yaml); nothing was sent`,
            { permanent: true },
          );
        }
      }
    }
    const attachments: Attachment[] = [];
    for (const [path, file] of files) attachments.push({ filename: file.name, content: await readAsStated(path, file.shown, file.size) });
    return { attachments, unmatched };
  } catch (err) {
    if (err instanceof DeliveryError) throw err;
    if (err instanceof ToolRefusal) throw new DeliveryError(`attachment ${err.message}`, { permanent: true, cause: err });
    throw new DeliveryError(`could not resolve attachments in ${workspace}: ${(err as Error).message}`, { permanent: false, cause: err });
  }
}

/**
 * The file's bytes, read only up to `size` (its size when the limits were checked). A file that
 * changed size since is not sent: it is probably still being written, so a later attempt may
 * find it complete.
 */
async function readAsStated(path: string, shown: string, size: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    // One byte more than expected tells a file that grew from one that did not.
    const buffer = Buffer.alloc(size + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length !== size) {
      throw new DeliveryError(`attachment ${shown} changed size while it was being attached (was ${bytes(size)}); trying again later`, {
        permanent: false,
      });
    }
    return buffer.subarray(0, size);
  } finally {
    await handle.close();
  }
}

function htmlDocument(body: string): string {
  return [
    "<!doctype html>",
    '<html><head><meta charset="utf-8">',
    "<style>table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px}pre{background:#f6f8fa;padding:8px;overflow:auto}</style>",
    `</head><body>${body}</body></html>`,
  ].join("\n");
}
