import { createHash } from "node:crypto";
import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { html, raw } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import type { Redactor } from "../audit/redact.js";
import { LINK_PATH, type ApprovalDesk } from "../approvals/desk.js";
import type { Approval, LinkCheck } from "../approvals/types.js";
import { MAX_NOTE } from "./approvals-api.js";
import type { Guard } from "./guard.js";
import type { ConsoleEnv } from "./sign-in.js";

/** The form's answer, token and note, with room for the form's encoding. */
const MAX_FORM = 16 * 1024;

const STYLE =
  "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}" +
  "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f6;padding:.75rem;border-radius:6px}" +
  "dt{font-weight:600}dd{margin:0 0 .5rem}textarea{width:100%;min-height:4rem}" +
  "button{font-size:1rem;padding:.5rem 1.25rem}.refused{color:#a1130f}";
const STYLE_TAG = raw(`<style>${STYLE}</style>`);
/** The one style the pages have, allowed by its hash: nothing else on them runs or loads. */
const CSP = `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`;

type Refusal = Extract<LinkCheck, { ok: false }>["why"];

/** Why a link is refused, for the person who followed it: the status and the words. */
const REFUSED: Record<Refusal, { status: 403 | 404 | 410; title: string; text: (a?: Approval) => string }> = {
  unknown: {
    status: 404,
    title: "No such request",
    text: () => "No approval request has this id: the link is wrong, or the request was removed.",
  },
  forged: {
    status: 403,
    title: "This link is forged",
    text: () => "Its signature is not countd's: the link was altered or made by someone else. Nothing was answered.",
  },
  "other call": {
    status: 403,
    title: "This link is for another call",
    text: () => "It was signed for a different request or tool call, not this one. Nothing was answered.",
  },
  malformed: {
    status: 403,
    title: "This link is damaged",
    text: () => "Its token is not one countd wrote: copy the whole link from the message. Nothing was answered.",
  },
  expired: {
    status: 410,
    title: "This link has expired",
    text: (a) =>
      `The request timed out${a ? ` at ${a.expiresAt}, and its on_timeout (${a.onTimeout}) applies` : ""}. Nothing was answered.`,
  },
  answered: {
    status: 410,
    title: "This request was already answered",
    text: (a) =>
      a?.answer
        ? `It was ${a.status} (${a.answer.via === "link" ? "by a link" : `by ${a.answer.by}`}) at ${a.answer.at}. A link works once.`
        : "A link works once.",
  },
};

/**
 * The pages an approval request's links open, outside /api/: they need no console token and
 * neither read nor set the sign-in cookie, since the link's signed token is their only
 * credential and grants its one answer. The GET page only shows what would be answered (a mail
 * scanner following the link answers nothing); its form's POST answers.
 */
export function approvalLinkRoutes(app: Hono<ConsoleEnv>, desk: ApprovalDesk | undefined, guard: Guard, redactor: () => Redactor): void {
  const path = `/${LINK_PATH}/:id`;
  const limit = bodyLimit({
    maxSize: MAX_FORM,
    onError: (c) => page(c, 413, "Too long", html`<p>The form is over ${MAX_FORM} bytes: shorten the note.</p>`),
  });

  app.get(path, async (c) => {
    if (!desk) return page(c, 404, "Approvals are not enabled", html`<p>This countd does not ask for approvals.</p>`);
    const id = c.req.param("id");
    const checked = await check(desk, id, c.req.query("token"), c.req.query("answer"));
    if (!checked.ok) return refused(c, checked);
    const approval = redactor().redactValue(checked.approval) as Approval;
    const verb = checked.answer === "approve" ? "Approve" : "Deny";
    return page(
      c,
      200,
      `${verb} this call?`,
      html`<p>The run waits for this answer. Nothing is answered until you press ${verb}.</p>
        ${details(approval)}
        <form method="post" action="/${LINK_PATH}/${encodeURIComponent(id)}">
          <input type="hidden" name="answer" value="${checked.answer}" />
          <input type="hidden" name="token" value="${c.req.query("token")}" />
          <p>
            <label for="note">${checked.answer === "approve" ? "Note" : "Reason"} (optional, kept in the run's journal)</label>
            <textarea id="note" name="note" maxlength="${MAX_NOTE}"></textarea>
          </p>
          <p><button type="submit">${verb}</button></p>
        </form>`,
    );
  });

  app.post(path, limit, async (c) => {
    if (!desk) return page(c, 404, "Approvals are not enabled", html`<p>This countd does not ask for approvals.</p>`);
    // The form is posted from the page above: a browser sends our Origin, or "null" as the pages send no referrer.
    const origin = c.req.header("origin");
    if (origin !== "null" && !guard.originAllowed(origin, c.req.header("host"), false))
      return page(c, 403, "Refused", html`<p>This answer was sent from another site's page. Open the link from the message instead.</p>`);
    if (!/^application\/x-www-form-urlencoded\b/i.test(c.req.header("content-type") ?? ""))
      return page(c, 400, "Not the page's form", html`<p>Send the answer with the form on the link's page.</p>`);
    const form = new URLSearchParams(await c.req.text());
    const id = c.req.param("id");
    const note = (form.get("note") ?? "").replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, " ").trim();
    if (note.length > MAX_NOTE)
      return page(c, 400, "The note is too long", html`<p>It has ${note.length} characters; at most ${MAX_NOTE}.</p>`);
    const token = form.get("token") ?? undefined;
    const checked = await check(desk, id, token, form.get("answer") ?? undefined);
    if (!checked.ok) return refused(c, checked);
    const done = await desk.answerLink(id, token!, note || undefined);
    if (!done.ok) return refused(c, done);
    const approval = redactor().redactValue(done.approval) as Approval;
    return done.answer === "approve"
      ? page(
          c,
          200,
          "Approved. The run goes on.",
          html`<p>The call runs now and the run goes on.</p>
            ${details(approval)}`,
        )
      : page(
          c,
          200,
          "Denied.",
          html`<p>The agent is told the call was denied, and the run goes on without it.</p>
            ${details(approval)}`,
        );
  });
}

/** The link's token checked, and the answer the address or the form names must be the one it signs. */
async function check(desk: ApprovalDesk, id: string, token: string | undefined, named: string | undefined): Promise<LinkCheck> {
  if (!token) return { ok: false, why: "malformed" };
  const checked = await desk.checkLink(id, token);
  if (checked.ok && named !== undefined && named !== checked.answer) return { ok: false, why: "forged", approval: checked.approval };
  return checked;
}

function refused(c: Context<ConsoleEnv>, checked: Extract<LinkCheck, { ok: false }>): Response | Promise<Response> {
  const { status, title, text } = REFUSED[checked.why];
  return page(c, status, title, html`<p class="refused">${text(checked.approval)}</p>`);
}

/** What the person answers about: everything the request said, escaped (the arguments and reasoning are the model's). */
function details(a: Approval): HtmlEscapedString | Promise<HtmlEscapedString> {
  return html`<dl>
      <dt>Job</dt>
      <dd>${a.job}</dd>
      <dt>Run</dt>
      <dd>${a.run}</dd>
      <dt>Tool</dt>
      <dd>${a.tool}</dd>
      <dt>Rule</dt>
      <dd>${a.rule}</dd>
      <dt>Asked</dt>
      <dd>${a.askedAt}</dd>
      <dt>Expires</dt>
      <dd>${a.expiresAt} (then: ${a.onTimeout})</dd>
    </dl>
    <h2>Arguments</h2>
    <pre class="arguments">${JSON.stringify(a.arguments, null, 2)}</pre>
    <h2>The agent's reasoning</h2>
    <pre class="reasoning">${a.reasoning}</pre>`;
}

async function page(
  c: Context<ConsoleEnv>,
  status: 200 | 400 | 403 | 404 | 410 | 413,
  title: string,
  body: HtmlEscapedString | Promise<HtmlEscapedString>,
): Promise<Response> {
  c.header("Content-Security-Policy", CSP);
  c.header("Cache-Control", "no-store");
  c.header("X-Robots-Tag", "noindex");
  return c.html(
    html`<!doctype html>
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title>${title} · countd</title>
          ${STYLE_TAG}
        </head>
        <body>
          <h1>${title}</h1>
          ${body}
        </body>
      </html>`,
    status,
  );
}
