// @ts-check
import { useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { useLive } from "./live.js";
import { ReplayActions } from "./rehearsal.js";
import {
  ActionButton,
  addCost,
  addUsage,
  count,
  duration,
  html,
  jobHref,
  Notice,
  runDuration,
  Status,
  Time,
  tokens,
  usageText,
  usd,
  useDebounced,
  useResource,
} from "./ui.js";

/**
 * @typedef {import("../src/console/protocol.js").RunView} RunView
 * @typedef {import("../src/console/protocol.js").RunRecord} RunRecord
 * @typedef {import("../src/console/protocol.js").RunDelivery} RunDelivery
 * @typedef {import("../src/console/protocol.js").Transcript} Transcript
 * @typedef {import("../src/console/protocol.js").TranscriptStep} TranscriptStep
 * @typedef {import("../src/console/protocol.js").CancelAnswer} CancelAnswer
 * @typedef {import("../src/console/protocol.js").Usage} Usage
 * @typedef {import("./live.js").PageMessage} PageMessage
 * @typedef {import("./ui.js").NoticeText} NoticeText
 * @typedef {TranscriptStep & { pending?: boolean }} Step a transcript's step, or one the live stream built (a tool call may be running)
 * @typedef {Step | { kind: "iteration"; iteration: number }} LiveStep
 * @typedef {{ steps: LiveStep[]; usage: Usage; cost: number | null; iteration: number; model?: string; finished?: boolean }} LiveRun
 */
/**
 * @template T
 * @typedef {import("./ui.js").ActionResult<T>} ActionResult
 */
/**
 * @template T
 * @typedef {import("./ui.js").Resource<T>} Resource
 */

/**
 * A run: its record, its transcript and its deliveries. While it runs, what it does comes from the
 * live stream and is shown as it arrives, the answer as plain text (it is Markdown from an
 * untrusted agent, half written); once it ends the page loads the transcript, whose text steps the
 * daemon has rendered and sanitised.
 * @param {{ job: string; id: string }} props
 */
export function RunPage({ job, id }) {
  const view = useResource(() => api.run(job, id), [job, id]);
  const live = useLiveRun(job, id, view);
  const [notice, setNotice] = useState(/** @type {NoticeText | undefined} */ (undefined));
  const v = view.data;
  // Until the finished run is loaded, its live steps stay on show; only the cancel goes at once.
  const running = v?.running;
  const cancellable = running && !live.finished;
  /** @param {ActionResult<CancelAnswer>} result */
  const cancelled = ({ ok, value, error }) =>
    setNotice(ok ? { kind: "info", text: `Cancel: ${value.status}…` } : { kind: "error", text: `Cancel: ${error.message}` });

  return html`
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Overview</a> / <a href=${jobHref(job)}>${job}</a> / <span>Run</span></nav>
    <div class="heading">
      <h1 tabindex="-1"><span class="mono">${id}</span></h1>
      ${cancellable && html`<${ActionButton} class="danger" act=${() => api.cancelRun(job, id)} onDone=${cancelled}>Cancel run<//>`}
    </div>
    ${notice && html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>`}
    ${view.error && html`<${Notice} kind="error">${view.error.message}<//>`}
    ${v && html`<${RunFacts} run=${v.run} zone=${v.timezone} running=${running} live=${live} />`}
    ${
      v?.transcript.prompt !== undefined &&
      html`<details class="prompt-box">
        <summary>Prompt</summary>
        <pre class="prompt">${v.transcript.prompt}</pre>
      </details>`
    }
    ${
      v &&
      html`<section aria-labelledby="transcript-title">
        <h2 id="transcript-title">
          ${running ? html`Transcript <span class="live-badge"><span class="dot dot-running" aria-hidden="true"></span>live</span>` : "Transcript"}
        </h2>
        ${running ? html`<${LiveSteps} steps=${live.steps} />` : html`<${Steps} transcript=${v.transcript} />`}
      </section>`
    }
    ${
      v?.transcript.output !== undefined &&
      html`<section aria-labelledby="output-title">
        <h2 id="output-title">Output</h2>
        <pre class="output mono">${JSON.stringify(v.transcript.output, null, 2)}</pre>
      </section>`
    }
    ${v && html`<${Deliveries} deliveries=${v.deliveries} zone=${v.timezone} notDelivered=${v.run.notDelivered} />`}
    ${v && !running && html`<${ReplayActions} job=${job} id=${id} />`}
  `;
}

/**
 * The run's live messages, subscribed to for as long as the page shows it. The replay after the
 * subscription holds everything so far; a run that ended before it has none, so the page then
 * loads the finished run.
 * @param {string} job
 * @param {string} id
 * @param {Resource<RunView>} view
 */
function useLiveRun(job, id, view) {
  const [live, setLive] = useState(noProgress);
  const seen = useRef(/** @type {{ replayed?: boolean; started?: boolean; reloaded?: boolean }} */ ({}));
  const deliveryChanged = useDebounced(view.reload, 200);
  // Once per replay: the view said running, the replay had no start, so the view is out of date.
  const endedUnseen = () => {
    const s = seen.current;
    if (!s.replayed || s.started || s.reloaded || !view.data?.running) return;
    s.reloaded = true;
    view.reload();
  };
  useLive({ run: id }, (m) => {
    if (m.type === "reset") {
      seen.current = {};
      setLive(noProgress);
      if (m.reconnected) view.reload();
      return;
    }
    if (m.type === "live") {
      seen.current.replayed = true;
      return endedUnseen();
    }
    if (m.job !== job || m.run_id !== id) return;
    if (m.type === "delivery") return deliveryChanged();
    if (m.type === "run_started") seen.current.started = true;
    if (m.type === "run_finished") {
      setLive((previous) => ({ ...previous, finished: true }));
      view.reload();
      return;
    }
    setLive((previous) => liveStep(previous, m));
  });
  // The view may arrive after the replay ended.
  useEffect(endedUnseen, [view.data]);
  return live;
}

/** @type {LiveRun} */
const noProgress = {
  steps: [],
  usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 },
  cost: 0,
  iteration: 0,
};

/**
 * @param {LiveRun} live
 * @param {PageMessage} m
 * @returns {LiveRun}
 */
function liveStep(live, m) {
  const steps = live.steps;
  switch (m.type) {
    case "iteration":
      return { ...live, iteration: m.iteration, steps: [...steps, { kind: "iteration", iteration: m.iteration }] };
    case "stream": {
      const last = steps.at(-1);
      if (last?.kind === "text") return { ...live, steps: [...steps.slice(0, -1), { kind: "text", text: last.text + m.content }] };
      return { ...live, steps: [...steps, { kind: "text", text: m.content }] };
    }
    case "run_started":
      return m.run.cost === null ? { ...live, cost: null } : live;
    case "tool_start":
      return { ...live, steps: [...steps, { kind: "tool", call_id: m.call_id, name: m.name, arguments: m.arguments, pending: true }] };
    case "tool_result":
      return {
        ...live,
        steps: steps.map((step) =>
          step.kind === "tool" && step.call_id === m.call_id
            ? {
                ...step,
                pending: false,
                result: m.error ?? m.result,
                is_error: m.error !== undefined,
                duration_ms: m.duration_ms,
                attempts: m.attempts,
              }
            : step,
        ),
      };
    case "llm": {
      return {
        ...live,
        usage: addUsage(live.usage, m.usage),
        cost: addCost(live.cost, m.cost),
        model: m.model,
        steps: m.error
          ? [...steps, { kind: "llm", model: m.model, usage: m.usage, cost: m.cost, duration_ms: m.duration_ms, error: m.error }]
          : steps,
      };
    }
    default:
      return live;
  }
}

/** @param {{ run: RunRecord; zone: string; running: boolean; live: LiveRun }} props */
function RunFacts({ run, zone, running, live }) {
  const usage = running ? live.usage : run.usage;
  const model = running ? live.model : run.model;
  return html`<dl class="facts">
      <div>
        <dt>Status</dt>
        <dd><${Status} status=${running ? "running" : run.status} /></dd>
      </div>
      <div>
        <dt>Reason</dt>
        <dd>${run.reason}</dd>
      </div>
      ${
        run.node !== undefined &&
        html`<div>
          <dt>Node</dt>
          <dd>${run.node}${(run.attempt ?? 1) > 1 ? ` (attempt ${run.attempt})` : ""}</dd>
        </div>`
      }
      <div>
        <dt>Scheduled</dt>
        <dd><${Time} at=${run.scheduledAt} zone=${zone} /></dd>
      </div>
      <div>
        <dt>Started</dt>
        <dd><${Time} at=${run.startedAt} zone=${zone} /></dd>
      </div>
      <div>
        <dt>Duration</dt>
        <dd>${running ? "running…" : duration(runDuration(run))}</dd>
      </div>
      <div>
        <dt>Iterations</dt>
        <dd>${running ? live.iteration : run.iterations}</dd>
      </div>
      <div>
        <dt>Tokens</dt>
        <dd>${count(tokens(usage))} <small class="muted">${usageText(usage)}</small></dd>
      </div>
      <div>
        <dt>Cost</dt>
        <dd>${usd(running ? live.cost : run.cost)}</dd>
      </div>
      ${
        model &&
        html`<div>
          <dt>Model</dt>
          <dd>${model}</dd>
        </div>`
      }
      ${
        run.files &&
        html`<div>
          <dt>Files</dt>
          <dd class="small">${run.files.join(", ")}${run.moreFiles ? `, and ${run.moreFiles} more` : ""}</dd>
        </div>`
      }
    </dl>
    ${!running && run.error && html`<${Notice} kind="error">${run.error}<//>`}`;
}

/** @param {{ steps: LiveStep[] }} props */
function LiveSteps({ steps }) {
  if (steps.length === 0) return html`<p class="empty">Waiting for the model…</p>`;
  return html`<ol class="steps">
    ${steps.map((step, i) =>
      step.kind === "iteration"
        ? html`<li key=${i} class="step step-call"><span class="call-label">Iteration ${step.iteration}</span></li>`
        : html`<${Step} key=${i} step=${step} />`,
    )}
  </ol>`;
}

/** @param {{ transcript: Transcript }} props */
function Steps({ transcript }) {
  let call = 0;
  return html`
    ${transcript.incomplete && html`<${Notice} kind="warn">${transcript.incomplete}<//>`}
    ${transcript.steps.length === 0 && !transcript.incomplete && html`<p class="empty">The run took no step.</p>`}
    <ol class="steps">
      ${transcript.steps.map(
        (step, i) => html`<${Step} key=${i} step=${step} call=${step.kind === "llm" && step.purpose !== "summary" ? ++call : undefined} />`,
      )}
    </ol>
  `;
}

/** @param {{ step: Step; call?: number }} props */
function Step({ step, call }) {
  if (step.kind === "subagent") {
    return html`<li class="step step-call">
      <span class="call-label">Subagent ${step.id}</span>
      <span class="muted small">${step.task}</span>
    </li>`;
  }
  if (step.kind === "approval") {
    const who = step.by ? ` by ${step.by} (${step.via})` : "";
    return html`<li class=${`step step-call${step.event === "asked" ? "" : step.event === "approved" ? "" : " step-error"}`}>
      <span class="call-label">Approval ${step.event} · ${step.tool}</span>
      <span class="muted small">${step.event === "asked" ? `${step.rule ?? ""}; until ${step.expires_at ?? "?"}` : `${who}${step.note ? `: ${step.note}` : ""}`}</span>
    </li>`;
  }
  if (step.kind === "verify") {
    return html`<li class=${`step step-call${step.passed ? "" : " step-error"}`}>
      <span class="call-label">Check ${step.index + 1} · ${step.check}</span>
      <span class="muted small mono">${step.what}</span>
      ${step.passed ? html`<span class="badge">passed</span>` : html`<div class="error-text">failed: ${step.reason}</div>`}
    </li>`;
  }
  // A subagent's steps lie among its parent's as they happened: each says whose it is.
  const whose = step.subagent !== undefined ? `subagent ${step.subagent} · ` : "";
  if (step.kind === "repair") {
    return html`<li class="step step-call step-error">
      <span class="call-label">${whose}Repair asked</span>
      <span class="muted small">the answer is not valid against output.schema</span>
      <ul class="error-text">
        ${step.errors.map((error) => html`<li>${error}</li>`)}
      </ul>
    </li>`;
  }
  if (step.kind === "llm") {
    return html`<li class=${`step step-call${step.error ? " step-error" : ""}`}>
      <span class="call-label">${whose}${step.purpose === "summary" ? "History summary" : call ? `Call ${call}` : "Call"}</span>
      <span class="muted small">
        ${step.model} · ${usageText(step.usage)}${step.cost !== undefined ? ` · ${usd(step.cost)}` : ""} · ${duration(step.duration_ms)}${step.finish_reason ? ` · ${step.finish_reason}` : ""}
      </span>
      ${step.error && html`<div class="error-text">${step.error}</div>`}
    </li>`;
  }
  if (step.kind === "text") {
    // Only the daemon's sanitised rendering is ever HTML; a live or unrendered answer is text.
    return step.html !== undefined
      ? html`<li class="step step-text"><div class="answer md" dangerouslySetInnerHTML=${{ __html: step.html }}></div></li>`
      : html`<li class="step step-text"><div class="answer live">${step.text}</div></li>`;
  }
  const state = step.pending
    ? "running…"
    : [step.duration_ms !== undefined && duration(step.duration_ms), (step.attempts ?? 1) > 1 && `${step.attempts} attempts`]
        .filter(Boolean)
        .join(" · ");
  return html`<li class="step step-tool">
    <details class=${`tool${step.is_error ? " tool-error" : ""}`}>
      <summary>
        <span class="tool-name mono">${whose}${step.name}</span>
        <span class="tool-args mono">${argumentsLine(step.arguments)}</span>
        <span class="muted small">${state}</span>
        ${step.is_error && html`<span class="badge badge-bad">error</span>`}
      </summary>
      <h3>Arguments</h3>
      <pre>${JSON.stringify(step.arguments, null, 2) ?? ""}</pre>
      <h3>${step.is_error ? "Error" : "Result"}</h3>
      ${step.pending ? html`<p class="muted">running…</p>` : html`<pre>${step.result ?? "(no result recorded)"}</pre>`}
    </details>
  </li>`;
}

/**
 * A tool call's arguments on one line, for the summary: the whole of them is inside.
 * @param {unknown} args
 */
function argumentsLine(args) {
  const text = typeof args === "string" ? args : (JSON.stringify(args) ?? "");
  return text.length > 120 ? `${text.slice(0, 119)}…` : text;
}

/** @param {{ deliveries: RunDelivery[]; zone: string; notDelivered?: string | undefined }} props */
function Deliveries({ deliveries, zone, notDelivered }) {
  return html`<section aria-labelledby="deliveries-title">
    <h2 id="deliveries-title">Deliveries</h2>
    ${
      deliveries.length === 0
        ? html`<p class="empty">${notDelivered ? `Not delivered: ${notDelivered}.` : "None: this run delivered nothing (yet)."}</p>`
        : html`<div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Target</th>
                  <th scope="col">Status</th>
                  <th scope="col" class="num">Attempts</th>
                  <th scope="col">When / last error</th>
                </tr>
              </thead>
              <tbody>
                ${deliveries.map(
                  (d) =>
                    html`<tr key=${d.id}>
                      <td><span class="badge">${d.kind}</span> ${d.to}</td>
                      <td><${Status} status=${d.held !== undefined ? "held" : d.status} /></td>
                      <td class="num">${d.attempts ?? "–"}</td>
                      <td>
                        ${d.held !== undefined && html`<div class="muted small">${d.held}</div><div><a href="#/outbox">Release it in the outbox</a></div>`}
                        ${d.delivered_at && html`delivered <${Time} at=${d.delivered_at} zone=${zone} />`}
                        ${d.next_attempt_at && html`next attempt <${Time} at=${d.next_attempt_at} zone=${zone} />`}
                        ${d.last_error && html`<div class="error-text">${d.last_error}</div>`}
                        ${d.status === "dead" && html`<div><a href="#/outbox">Retry it in the outbox</a></div>`}
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }
  </section>`;
}
