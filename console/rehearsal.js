// @ts-check
import { useEffect, useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { ActionButton, count, html, jobHref, Notice, runHref, Status, Time, tokens, usageText, usd, useResource } from "./ui.js";

/**
 * @typedef {import("../src/console/rehearsal-protocol.js").RehearsalView} RehearsalView
 * @typedef {import("../src/console/rehearsal-protocol.js").RehearsalStarted} RehearsalStarted
 * @typedef {import("../src/console/rehearsal-protocol.js").CapturedDelivery} CapturedDelivery
 * @typedef {import("../src/console/rehearsal-protocol.js").ReplayReport} ReplayReport
 */
/**
 * @template T
 * @typedef {import("./ui.js").ActionResult<T>} ActionResult
 */

/** How often a running rehearsal's view asks whether it has ended. */
const POLL_MS = 1000;

/** @param {string} id */
export const rehearsalHref = (id) => `#/rehearsals/${encodeURIComponent(id)}`;

/**
 * Once started, the page goes to the rehearsal's view; a refusal is said where the form is.
 * @param {(text: string) => void} say
 * @returns {(result: ActionResult<RehearsalStarted>) => void}
 */
const followOrSay = (say) => (result) => {
  if (result.ok) location.hash = rehearsalHref(result.value.id);
  else say(result.error.message);
};

/**
 * The job page's Rehearse: a run against the real model with nothing sent, at the instant and with
 * the files or payload given.
 * @param {{ job: string }} props
 */
export function RehearseForm({ job }) {
  const [at, setAt] = useState("");
  const [files, setFiles] = useState("");
  const [payload, setPayload] = useState("");
  const [error, setError] = useState("");
  const fire = () => {
    const paths = files
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean);
    return api.rehearse(job, { ...(at ? { at } : {}), ...(paths.length ? { files: paths } : {}), ...(payload ? { payload } : {}) });
  };
  return html`<details class="tryout">
    <summary>Rehearse</summary>
    <p class="muted small">
      One run against the real model (it costs what a run costs): deliveries are rendered, not sent; tools act on a copy of the workspace.
    </p>
    <div class="fields">
      <label>At <span class="muted small">the instant the prompt sees, in the job's zone (empty: now)</span>
        <input type="datetime-local" step="1" value=${at} onInput=${(/** @type {any} */ e) => setAt(e.currentTarget.value)} />
      </label>
      <label>Files <span class="muted small">one path a line, relative to the workspace (a watch job's files)</span>
        <textarea rows="2" value=${files} onInput=${(/** @type {any} */ e) => setFiles(e.currentTarget.value)}></textarea>
      </label>
      <label>Payload <span class="muted small">a webhook job's request body</span>
        <textarea rows="3" value=${payload} onInput=${(/** @type {any} */ e) => setPayload(e.currentTarget.value)}></textarea>
      </label>
    </div>
    ${error && html`<${Notice} kind="error" onClose=${() => setError("")}>Rehearse: ${error}<//>`}
    <${ActionButton} class="primary" act=${fire} onDone=${followOrSay(setError)}>Start the rehearsal<//>
  </details>`;
}

/**
 * The run page's Replay (from its journal, no model call) and Fork (the model called anew with a
 * new model, prompt or system prompt; recorded tool results reused).
 * @param {{ job: string; id: string }} props
 */
export function ReplayActions({ job, id }) {
  const [model, setModel] = useState("");
  const [prompt, setPrompt] = useState("");
  const [system, setSystem] = useState("");
  const [error, setError] = useState("");
  const changes = {
    ...(model.trim() ? { model: model.trim() } : {}),
    ...(prompt.trim() ? { prompt } : {}),
    ...(system.trim() ? { system_prompt: system } : {}),
  };
  return html`<section class="tryout" aria-labelledby="replay-title">
    <h2 id="replay-title">Replay or fork</h2>
    ${error && html`<${Notice} kind="error" onClose=${() => setError("")}>${error}<//>`}
    <p>
      <${ActionButton} act=${() => api.replay(job, id, {})} onDone=${followOrSay(setError)}>Replay<//>
      <span class="muted small"> the run again from its journal: no model call, no tool runs; says whether it comes out identical</span>
    </p>
    <details>
      <summary>Fork</summary>
      <div class="fields">
        <label>Model <span class="muted small">empty: the run's</span>
          <input type="text" value=${model} onInput=${(/** @type {any} */ e) => setModel(e.currentTarget.value)} />
        </label>
        <label>Prompt <span class="muted small">empty: the run's</span>
          <textarea rows="4" value=${prompt} onInput=${(/** @type {any} */ e) => setPrompt(e.currentTarget.value)}></textarea>
        </label>
        <label>System prompt <span class="muted small">empty: the run's</span>
          <textarea rows="3" value=${system} onInput=${(/** @type {any} */ e) => setSystem(e.currentTarget.value)}></textarea>
        </label>
      </div>
      <${ActionButton}
        class="primary"
        act=${() => (Object.keys(changes).length ? api.replay(job, id, changes) : Promise.reject(new Error("Fork: change the model, the prompt or the system prompt")))}
        onDone=${followOrSay(setError)}
        >Fork<//
      >
    </details>
  </section>`;
}

/**
 * A rehearsal, replay or fork: while it runs, that it runs; then its run, its answer, what it would
 * have sent, and for a replay or a fork how it compares with the run it repeats.
 * @param {{ id: string }} props
 */
export function RehearsalPage({ id }) {
  const view = useResource(() => api.rehearsal(id), [id]);
  const v = view.data;
  const running = v?.state === "running";
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(view.reload, POLL_MS);
    return () => clearInterval(timer);
  }, [running, view.reload]);
  const word = v ? { rehearsal: "Rehearsal", replay: "Replay", fork: "Fork" }[v.kind] : "Rehearsal";
  return html`
    <nav class="crumbs" aria-label="Breadcrumb">
      <a href="#/">Overview</a> / ${v ? html`<a href=${jobHref(v.job)}>${v.job}</a>` : "…"} / <span>${word}</span>
    </nav>
    <div class="heading">
      <h1 tabindex="-1">${word} <span class="mono">${id}</span></h1>
    </div>
    ${view.error && html`<${Notice} kind="error">${view.error.message}<//>`}
    ${v?.state === "running" && html`<p class="status-line" role="status"><${Status} status="running" /> ${word.toLowerCase()} in progress…</p>`}
    ${v?.state === "failed" && html`<${Notice} kind="error">The ${v.kind} could not run: ${v.error}<//>`}
    ${v?.state === "done" && html`<${Ended} view=${v} />`}
  `;
}

/** @param {{ view: Extract<RehearsalView, { state: "done" }> }} props */
function Ended({ view }) {
  const report = view.replay;
  return html`
    <dl class="facts">
      <dt>Run</dt>
      <dd><a class="mono" href=${runHref(view.job, view.run.id)}>${view.run.id}</a> <${Status} status=${view.run.status} /></dd>
      ${
        report &&
        html`<dt>Of run</dt>
        <dd><a class="mono" href=${runHref(report.of.job, report.of.run)}>${report.of.run}</a></dd>`
      }
      <dt>Started</dt>
      <dd><${Time} at=${view.run.startedAt} /></dd>
      <dt>Tokens</dt>
      <dd title=${usageText(view.run.usage)}>${count(tokens(view.run.usage))} · ${usd(view.run.cost)}</dd>
      ${view.run.error && html`<dt>Error</dt><dd>${view.run.error}</dd>`}
    </dl>
    ${report && html`<${Comparison} report=${report} />`}
    <section aria-labelledby="answer-title">
      <h2 id="answer-title">Answer</h2>
      <pre class="prompt">${view.answer || "(no answer)"}</pre>
    </section>
    <section aria-labelledby="captured-title">
      <h2 id="captured-title">What it would have sent</h2>
      ${view.deliveries.length === 0 && html`<p class="empty">Nothing: the run made no delivery.</p>`}
      ${view.deliveries.map((delivery) => html`<${Captured} key=${delivery.id} id=${view.id} delivery=${delivery} />`)}
    </section>
  `;
}

/** @param {{ report: ReplayReport }} props */
function Comparison({ report }) {
  const fork = report.kind === "fork";
  return html`<section aria-labelledby="compare-title">
    <h2 id="compare-title">Against run ${report.of.run}</h2>
    <p class=${`verdict ${report.identical ? "verdict-same" : "verdict-differs"}`}>
      ${report.identical ? "identical" : fork ? "differs" : "not identical"}
      <span class="muted small"> status ${report.status.original} → ${report.status.replayed}</span>
    </p>
    ${report.notes.length > 0 && html`<ul class="problems">${report.notes.map((note) => html`<li>${note}</li>`)}</ul>`}
    ${report.answer.diff && html`<h3>Answer</h3><${Diff} text=${report.answer.diff} />`}
    ${report.deliveries
      .filter((delivery) => delivery.diff)
      .map((delivery) => html`<h3>Delivery ${delivery.to}</h3><${Diff} text=${delivery.diff ?? ""} />`)}
    ${
      fork &&
      html`<h3>Tool calls</h3>
        <div class="side-by-side">
          <${Calls} title="Original" calls=${report.tools.original} />
          <${Calls} title="Fork" calls=${report.tools.replayed} />
        </div>
        <p class="muted small">${report.tools.served} served from the original's results${report.tools.ran.length ? `; ran: ${report.tools.ran.join(", ")}` : ""}</p>
        <table class="runs spend">
          <thead><tr><th scope="col"></th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Cost</th></tr></thead>
          <tbody>
            <tr><th scope="row">Original</th><td class="num" title=${usageText(report.spend.original.usage)}>${count(tokens(report.spend.original.usage))}</td><td class="num">${usd(report.spend.original.cost)}</td></tr>
            <tr><th scope="row">Fork</th><td class="num" title=${usageText(report.spend.replayed.usage)}>${count(tokens(report.spend.replayed.usage))}</td><td class="num">${usd(report.spend.replayed.cost)}</td></tr>
          </tbody>
        </table>`
    }
  </section>`;
}

/** @param {{ title: string; calls: ReplayReport["tools"]["original"] }} props */
function Calls({ title, calls }) {
  return html`<div>
    <h4>${title}</h4>
    ${
      calls.length === 0
        ? html`<p class="muted small">no tool calls</p>`
        : html`<ol class="calls">${calls.map((call) => html`<li><span class="mono">${call.name}</span> <span class="muted small mono">${JSON.stringify(call.arguments)}</span></li>`)}</ol>`
    }
  </div>`;
}

/**
 * A unified diff as preformatted text, its added and removed lines coloured (and marked + and -, never colour alone).
 * @param {{ text: string }} props
 */
function Diff({ text }) {
  const kind = (/** @type {string} */ line) =>
    line.startsWith("+++") || line.startsWith("---")
      ? "diff-file"
      : line.startsWith("+")
        ? "diff-add"
        : line.startsWith("-")
          ? "diff-del"
          : line.startsWith("@@")
            ? "diff-hunk"
            : "";
  return html`<pre class="diff">${text.split("\n").map((line) => html`<span class=${kind(line)}>${`${line}\n`}</span>`)}</pre>`;
}

/**
 * One delivery it would have made: a mail as its recipient would see it, a webhook's request as sent.
 * @param {{ id: string; delivery: CapturedDelivery }} props
 */
function Captured({ id, delivery }) {
  const page = delivery.files.find((file) => file.endsWith(".html"));
  return html`<article class="captured">
    <h3>${delivery.target === "email" ? "Mail" : "Webhook"} <span class="muted small">${delivery.kind}</span></h3>
    ${
      delivery.target === "email"
        ? html`<dl class="facts">
              <dt>To</dt>
              <dd>${delivery.to.replace(/^email to /, "")}</dd>
              <dt>Subject</dt>
              <dd class="subject">${delivery.subject ?? ""}</dd>
            </dl>
            ${page && html`<iframe class="mail" title=${`The mail to ${delivery.to}`} sandbox="" src=${api.rehearsalFile(id, page)}></iframe>`}`
        : html`<dl class="facts"><dt>To</dt><dd>${delivery.to}</dd></dl>`
    }
    <${Files} id=${id} files=${delivery.files.filter((file) => delivery.target !== "email" || file.endsWith(".eml"))} show=${delivery.target !== "email"} />
  </article>`;
}

/**
 * A webhook's headers and body shown as text; a mail's .eml offered as a link.
 * @param {{ id: string; files: string[]; show: boolean }} props
 */
function Files({ id, files, show }) {
  const [texts, setTexts] = useState(/** @type {Record<string, string>} */ ({}));
  useEffect(() => {
    if (!show) return;
    for (const file of files)
      api.rehearsalText(id, file).then(
        (text) => setTexts((previous) => ({ ...previous, [file]: text })),
        (/** @type {Error} */ error) => setTexts((previous) => ({ ...previous, [file]: error.message })),
      );
  }, [id, files.join("\n"), show]);
  return html`${files.map(
    (file) => html`<div class="file">
      <p class="muted small"><a href=${api.rehearsalFile(id, file)} target="_blank" rel="noopener">${file}</a></p>
      ${show && html`<pre class="prompt">${texts[file] ?? "…"}</pre>`}
    </div>`,
  )}`;
}
