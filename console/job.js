// @ts-check
import { useCallback, useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { RunTrend } from "./charts.js";
import { useLive } from "./live.js";
import { RehearseForm } from "./rehearsal.js";
import {
  ActionButton,
  count,
  duration,
  fireText,
  html,
  Notice,
  runDuration,
  runHref,
  Status,
  Time,
  tokens,
  usageText,
  usd,
  useDebounced,
  useResource,
} from "./ui.js";

/**
 * @typedef {import("../src/console/protocol.js").JobView} JobView
 * @typedef {import("../src/console/protocol.js").JobDetail} JobDetail
 * @typedef {import("../src/console/protocol.js").RunRecord} RunRecord
 * @typedef {import("../src/console/protocol.js").RunNowAnswer} RunNowAnswer
 * @typedef {import("../src/console/protocol.js").PauseAnswer} PauseAnswer
 * @typedef {import("./ui.js").NoticeText} NoticeText
 */
/**
 * @template T
 * @typedef {import("./ui.js").ActionResult<T>} ActionResult
 */

const PAGE = 50;

/** @param {{ name: string }} props */
export function JobPage({ name }) {
  const job = useResource(() => api.job(name), [name]);
  const history = useHistory(name);
  // A file that loaded no job has no runs to chart: the API would answer 404.
  const loaded = Boolean(job.data?.loaded);
  const stats = useResource(() => (loaded ? api.stats(30, name) : Promise.resolve(undefined)), [name, loaded]);
  const [notice, setNotice] = useState(/** @type {NoticeText | undefined} */ (undefined));
  const refresh = useDebounced(() => {
    job.reload();
    history.reload();
    stats.reload();
  }, 300);
  useLive({ job: name }, (m) => {
    if (m.type === "run_started" || m.type === "run_finished" || (m.type === "reset" && m.reconnected)) refresh();
  });

  const j = job.data;
  /** @param {ActionResult<RunNowAnswer>} result */
  const ranNow = ({ ok, value, error }) => {
    if (!ok) return setNotice({ kind: "error", text: `Run now: ${error.message}` });
    if (value.status === "started") location.hash = runHref(name, value.run_id);
    else setNotice({ kind: value.status === "skipped" ? "warn" : "info", text: `Run now: ${value.status}: ${value.message}` });
    history.reload();
  };
  /** @param {ActionResult<PauseAnswer>} result */
  const toggled = ({ ok, error }) => {
    if (!ok) setNotice({ kind: "error", text: error.message });
    job.reload();
  };
  return html`
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Overview</a> / <span>Job</span></nav>
    <div class="heading">
      <h1 tabindex="-1">${name}</h1>
      ${
        j?.loaded &&
        html`<div class="actions">
          <${ActionButton} class="primary" act=${() => api.runNow(name)} onDone=${ranNow}>Run now<//>
          <${ActionButton} act=${() => api.setPaused(!j.paused_at, name)} onDone=${toggled}>${j.paused_at ? "Resume" : "Pause"}<//>
        </div>`
      }
    </div>
    ${notice && html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>`}
    ${job.error && html`<${Notice} kind="error">${job.error.message}<//>`} ${j && html`<${JobState} job=${j} />`}
    ${j?.loaded && html`<${RehearseForm} job=${name} />`} ${j && "settings" in j && html`<${Settings} job=${j} />`}
    ${
      j?.loaded &&
      html`<section aria-labelledby="trend-title">
        <h2 id="trend-title">Finished runs, last 30 days</h2>
        ${stats.error && html`<${Notice} kind="error">Charts: ${stats.error.message}<//>`}
        ${
          stats.data &&
          html`<div class="charts">
            <figure>
              <figcaption>Duration</figcaption>
              <${RunTrend} runs=${stats.data.runs} field="duration_ms" />
            </figure>
            <figure>
              <figcaption>Tokens</figcaption>
              <${RunTrend} runs=${stats.data.runs} field="tokens" />
            </figure>
            <figure>
              <figcaption>Cost</figcaption>
              <${RunTrend} runs=${stats.data.runs} field="cost" />
            </figure>
          </div>`
        }
      </section>`
    }
    ${j?.loaded && html`<${History} job=${name} zone=${j.timezone} history=${history} />`}
  `;
}

/** @param {{ job: JobView }} props */
function JobState({ job }) {
  return html`
    ${job.description && html`<p class="lead">${job.description}</p>`}
    <p class="badges">
      ${!job.loaded && html`<span class="badge badge-bad">invalid: no job loaded</span>`}
      ${job.loaded && !job.enabled && html`<span class="badge">disabled</span>`}
      ${job.paused && html`<span class="badge badge-warn">paused</span>`}
      ${job.paused && (job.paused_at ? html` <span class="muted">since <${Time} at=${job.paused_at} zone=${job.timezone} />: its fires are recorded as skipped</span>` : html` <span class="muted">all jobs are paused (Resume all on the overview)</span>`)}
    </p>
    ${
      job.problems.length > 0 &&
      html`<${Notice} kind=${job.loaded ? "warn" : "error"}>
        ${job.loaded ? `${job.file} has problems; the job keeps its last good version:` : `${job.file} is invalid:`}
        <ul class="problems">
          ${job.problems.map((problem) => html`<li>${problem}</li>`)}
        </ul>
      <//>`
    }
  `;
}

/** @param {{ job: JobDetail }} props */
function Settings({ job }) {
  const s = job.settings;
  /** @param {import("/assets/vendor/preact.js").ComponentChild[]} items */
  const list = (items) =>
    items.length
      ? html`<ul class="plain">
          ${items.map((item) => html`<li>${item}</li>`)}
        </ul>`
      : html`<span class="muted">none</span>`;
  return html`<section aria-labelledby="settings-title">
    <h2 id="settings-title">Settings <span class="muted small">${job.file}</span></h2>
    <dl class="settings">
      <dt>Trigger</dt>
      <dd>${job.trigger}</dd>
      <dt>Time zone</dt>
      <dd>${job.timezone}</dd>
      <dt>Next fires</dt>
      <dd>${list(job.next_fires.map((at) => html`<time datetime=${at}>${fireText(at, job.timezone)}</time>`))}</dd>
      ${
        s.watch &&
        html`<dt>Watches</dt>
          <dd>${list(s.watch.paths)}</dd>`
      }
      ${
        s.webhook &&
        html`<dt>Webhook</dt>
          <dd><code>POST ${s.webhook.path}</code>, signed; bodies up to ${count(s.webhook.max_body)} bytes, ${s.webhook.rate} a minute</dd>`
      }
      <dt>Session</dt>
      <dd>${s.session}</dd>
      <dt>Overlap</dt>
      <dd>${s.overlap}</dd>
      <dt>Timeout</dt>
      <dd>${duration(s.timeout_ms)}</dd>
      <dt>Catch up</dt>
      <dd>${s.catch_up_ms ? `within ${duration(s.catch_up_ms)}` : "no"}</dd>
      <dt>Retry</dt>
      <dd>${s.retry.attempts > 1 ? `${s.retry.attempts} attempts, ${duration(s.retry.backoff_ms)} apart` : "no"}</dd>
      <dt>Tools</dt>
      <dd>${s.tools ? list(s.tools) : html`<span class="muted">the default set</span>`}</dd>
      <dt>Deliver</dt>
      <dd>
        ${list(s.deliver)}${s.deliver.length > 0 && html`<span class="muted small">${s.deliver_when === "always" ? "every answer" : "only a non-empty answer"}</span>`}
      </dd>
      <dt>On failure</dt>
      <dd>${list(s.on_failure)}</dd>
      <dt>Prompt</dt>
      <dd><pre class="prompt">${s.prompt}</pre></dd>
    </dl>
  </section>`;
}

/**
 * The job's runs, newest first, a page at a time: "Older runs" follows the API's cursor. A reload
 * (a run started or ended) merges the newest page into what is shown, so older pages stay and no
 * run falls between two pages.
 * @typedef {{ runs?: RunRecord[]; next?: string; older?: boolean; error?: Error }} HistoryState
 * @typedef {HistoryState & { more: () => Promise<void>; reload: () => Promise<void> }} JobHistory
 * @param {string} name
 * @returns {JobHistory}
 */
function useHistory(name) {
  const [history, setHistory] = useState(/** @type {HistoryState} */ ({}));
  const current = useRef(name);
  current.current = name;
  const load = useCallback(
    /** @param {string} [before] */
    async (before) => {
      try {
        const page = await api.runs(name, PAGE, before);
        if (current.current !== name) return;
        setHistory((previous) => ({
          runs: mergeRuns(previous.runs ?? [], page.runs),
          // Once an older page is shown, the cursor is the oldest page's: the newest page's would fetch it again.
          next: before || !previous.older ? page.next : previous.next,
          older: previous.older || Boolean(before),
        }));
      } catch (error) {
        if (current.current === name) setHistory((previous) => ({ ...previous, error: /** @type {Error} */ (error) }));
      }
    },
    [name],
  );
  useEffect(() => {
    setHistory({});
    load();
  }, [load]);
  return { ...history, more: () => load(history.next), reload: () => load() };
}

/**
 * @param {RunRecord[]} shown
 * @param {RunRecord[]} page
 */
function mergeRuns(shown, page) {
  const byId = new Map(shown.map((run) => [run.id, run]));
  for (const run of page) byId.set(run.id, run);
  return [...byId.values()].sort((a, b) => (a.startedAt === b.startedAt ? (a.id < b.id ? 1 : -1) : a.startedAt < b.startedAt ? 1 : -1));
}

/** @param {{ job: string; zone: string; history: JobHistory }} props */
function History({ job, zone, history }) {
  return html`<section aria-labelledby="history-title">
    <h2 id="history-title">Runs</h2>
    ${history.error && html`<${Notice} kind="error">Runs: ${history.error.message}<//>`}
    ${history.runs?.length === 0 && html`<p class="empty">This job has not run yet.</p>`}
    ${
      history.runs &&
      history.runs.length > 0 &&
      html`<div class="table-wrap">
        <table class="runs">
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Status</th>
              <th scope="col">Reason</th>
              <th scope="col">Scheduled</th>
              <th scope="col">Started</th>
              <th scope="col" class="num">Duration</th>
              <th scope="col" class="num">Tokens</th>
              <th scope="col" class="num">Cost</th>
            </tr>
          </thead>
          <tbody>
            ${history.runs.map(
              (run) =>
                html`<tr key=${run.id}>
                  <th scope="row"><a href=${runHref(job, run.id)} class="mono">${run.id}</a></th>
                  <td>
                    <${Status}
                      status=${run.status}
                    />${run.error && html`<div class="muted small clip" title=${run.error}>${run.error}</div>`}
                  </td>
                  <td>${run.reason}</td>
                  <td><${Time} at=${run.scheduledAt} zone=${zone} /></td>
                  <td><${Time} at=${run.startedAt} zone=${zone} /></td>
                  <td class="num">${run.status === "running" ? "running…" : duration(runDuration(run))}</td>
                  <td class="num" title=${usageText(run.usage)}>
                    ${count(tokens(run.usage))}${run.usage.cachedInputTokens > 0 && html`<div class="muted small">${count(run.usage.cachedInputTokens)} cached</div>`}
                  </td>
                  <td class="num">${usd(run.cost)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>`
    }
    ${history.next && html`<p><button type="button" onClick=${history.more}>Older runs</button></p>`}
  </section>`;
}
