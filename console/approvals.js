// @ts-check
import { useEffect, useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { ActionButton, html, Notice, runHref, Time } from "./ui.js";

/**
 * @typedef {import("../src/console/approvals-protocol.js").ApprovalItem} ApprovalItem
 * @typedef {import("../src/console/approvals-protocol.js").ApprovalsView} ApprovalsView
 * @typedef {import("./ui.js").NoticeText} NoticeText
 */

/** How often the page and the navigation's badge ask what waits: an approval is asked for hours, a few seconds late is no harm. */
const POLL_MS = 10_000;

/**
 * @typedef {{ state: "loading" } | { state: "off" } | { state: "error"; error: Error } | { state: "ready"; view: ApprovalsView }} Approvals
 */

/** @type {Set<(value: Approvals) => void>} */
const listeners = new Set();
/** @type {Approvals} */
let current = { state: "loading" };
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;

/** Asks the daemon now, then every POLL_MS while something shows approvals; 404 means this countd asks for none. */
async function refresh() {
  clearTimeout(timer);
  try {
    current = { state: "ready", view: await api.approvals() };
  } catch (error) {
    current =
      error instanceof api.ApiError && error.status === 404
        ? { state: "off" }
        : { state: "error", error: error instanceof Error ? error : new Error(String(error)) };
  }
  for (const listener of listeners) listener(current);
  if (listeners.size > 0 && current.state !== "off") timer = setTimeout(refresh, POLL_MS);
}

/** The approvals as last asked, shared by the badge and the page so both say the same. */
function useApprovals() {
  const [value, setValue] = useState(current);
  useEffect(() => {
    listeners.add(setValue);
    if (listeners.size === 1) refresh();
    else setValue(current);
    return () => {
      listeners.delete(setValue);
      if (listeners.size === 0) clearTimeout(timer);
    };
  }, []);
  return value;
}

/** The navigation's link, with the count of calls waiting for an answer; none when this countd asks for no approvals. */
/** @param {{ current: boolean }} props */
export function ApprovalsNav({ current: here }) {
  const approvals = useApprovals();
  if (approvals.state === "off") return null;
  const waiting = approvals.state === "ready" ? approvals.view.approvals.filter((a) => a.status === "waiting").length : 0;
  return html`<a href="#/approvals" aria-current=${here ? "page" : undefined}
    >Approvals${waiting > 0 && html` <span class="badge badge-warn count" aria-label=${`${waiting} waiting`}>${waiting}</span>`}</a
  >`;
}

/** Tool calls waiting for a person's yes, with their answers; those answered below. */
export function ApprovalsPage() {
  const approvals = useApprovals();
  const [notice, setNotice] = useState(/** @type {NoticeText | undefined} */ (undefined));
  const all = approvals.state === "ready" ? approvals.view.approvals : [];
  const waiting = all.filter((a) => a.status === "waiting");
  const answered = all.filter((a) => a.status !== "waiting");
  /** @param {string} text */
  const done = (text) => {
    setNotice({ kind: "info", text });
    refresh();
  };
  /** @param {string} text */
  const failed = (text) => {
    setNotice({ kind: "error", text });
    refresh();
  };
  return html`
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Overview</a> / <span>Approvals</span></nav>
    <h1 tabindex="-1">Approvals</h1>
    ${notice && html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>`}
    ${approvals.state === "error" && html`<${Notice} kind="error">${approvals.error.message}<//>`}
    ${approvals.state === "off" && html`<p class="empty">This countd asks for no approvals: no job has approve: rules.</p>`}
    ${
      approvals.state === "ready" &&
      html`
        <section aria-labelledby="waiting-title">
          <h2 id="waiting-title">Waiting <span class="muted">(${waiting.length})</span></h2>
          ${waiting.length === 0 && html`<p class="empty">No tool call waits for an answer.</p>`}
          ${waiting.map((a) => html`<${Waiting} key=${a.id} approval=${a} done=${done} failed=${failed} />`)}
        </section>
        <section aria-labelledby="answered-title">
          <h2 id="answered-title">Answered <span class="muted">(${answered.length})</span></h2>
          ${answered.length === 0 && html`<p class="empty">None answered yet.</p>`}
          ${answered.map((a) => html`<${Answered} key=${a.id} approval=${a} />`)}
        </section>
      `
    }
  `;
}

/** @param {{ approval: ApprovalItem; done: (text: string) => void; failed: (text: string) => void }} props */
function Waiting({ approval: a, done, failed }) {
  const [note, setNote] = useState("");
  /** @param {"approve" | "deny"} answer */
  const answered =
    (answer) =>
    (/** @type {import("./ui.js").ActionResult<unknown>} */ { ok, error }) =>
      ok
        ? done(`${answer === "approve" ? "Approved" : "Denied"}: ${a.tool} of ${a.job}.`)
        : failed(`${a.tool} of ${a.job}: ${error.message}`);
  return html`<article class="approval waiting" aria-label=${`${a.tool} in ${a.job}`}>
    <${Facts} approval=${a} />
    <details>
      <summary>The agent's reasoning</summary>
      <pre class="reasoning">${a.reasoning}</pre>
    </details>
    <p>
      <label>Note or reason (optional) <input type="text" value=${note} maxlength="2000" onInput=${(/** @type {any} */ e) => setNote(e.currentTarget.value)} /></label>
    </p>
    <p class="actions">
      <${ActionButton} class="primary" act=${() => api.answerApproval(a.id, "approve", note)} onDone=${answered("approve")} label=${`Approve ${a.tool} of ${a.job}`}>Approve<//>
      <${ActionButton} act=${() => api.answerApproval(a.id, "deny", note)} onDone=${answered("deny")} label=${`Deny ${a.tool} of ${a.job}`}>Deny<//>
    </p>
  </article>`;
}

/** @param {{ approval: ApprovalItem }} props */
function Answered({ approval: a }) {
  const answer = a.answer;
  return html`<article class="approval answered" aria-label=${`${a.tool} in ${a.job}, ${a.status}`}>
    <${Facts} approval=${a} />
    <p>
      <strong class="status">${a.status}</strong>
      ${answer && html` by ${answer.by} (${answer.via}) <${Time} at=${answer.at} />${answer.note && html`: “${answer.note}”`}`}
    </p>
  </article>`;
}

/** @param {{ approval: ApprovalItem }} props */
function Facts({ approval: a }) {
  return html`<dl class="facts">
      <dt>Job</dt>
      <dd>${a.job}</dd>
      <dt>Run</dt>
      <dd><a class="mono" href=${runHref(a.job, a.run)}>${a.run}</a></dd>
      <dt>Tool</dt>
      <dd class="mono">${a.tool}</dd>
      <dt>Asked</dt>
      <dd><${Time} at=${a.asked_at} /></dd>
      <dt>Expires</dt>
      <dd><${Time} at=${a.expires_at} /> (then ${a.on_timeout})</dd>
    </dl>
    <pre class="arguments">${JSON.stringify(a.arguments, null, 2)}</pre>`;
}
