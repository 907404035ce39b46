// @ts-check
import { useEffect, useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { RunsPerDay } from "./charts.js";
import { useLive } from "./live.js";
import {
  ActionButton,
  addCost,
  ago,
  count,
  duration,
  fireText,
  html,
  jobHref,
  Notice,
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
 * @typedef {import("../src/console/protocol.js").StatusView} StatusView
 * @typedef {import("../src/console/protocol.js").JobView} JobView
 * @typedef {import("../src/console/protocol.js").Spend} Spend
 * @typedef {import("../src/console/protocol.js").PauseAnswer} PauseAnswer
 * @typedef {import("../src/console/protocol.js").RunReason} RunReason
 * @typedef {import("./live.js").PageMessage} PageMessage
 * @typedef {import("./ui.js").NoticeText} NoticeText
 */
/**
 * @template T
 * @typedef {import("./ui.js").ActionResult<T>} ActionResult
 */

/** The last characters of a run's answer shown on the overview: enough to see it move. */
const TAIL_CHARS = 600;
const STATUS_EVERY_MS = 30_000;

export function Overview() {
  const status = useResource(api.status, []);
  const jobs = useResource(api.jobs, []);
  const stats = useResource(() => api.stats(14), []);
  const running = useRunsInProgress(() => {
    status.reload();
    jobs.reload();
    stats.reload();
  });
  const [notice, setNotice] = useState(/** @type {NoticeText | undefined} */ (undefined));

  // Uptime, next fires and the runs a schedule started: the overview stays current while left open.
  useEffect(() => {
    const timer = setInterval(() => {
      status.reload();
      jobs.reload();
    }, STATUS_EVERY_MS);
    return () => clearInterval(timer);
  }, []);

  const s = status.data;
  /** @param {ActionResult<PauseAnswer>} result */
  const toggleAll = ({ ok, error }) => {
    if (!ok) setNotice({ kind: "error", text: error.message });
    status.reload();
    jobs.reload();
  };
  return html`
    <div class="heading">
      <h1 tabindex="-1">Overview</h1>
      ${
        s &&
        html`<${ActionButton}
          class=${s.jobs.paused_all ? "primary" : "danger"}
          act=${() => api.setPaused(!s.jobs.paused_all)}
          onDone=${toggleAll}
          >${s.jobs.paused_all ? "Resume all" : "Pause all"}<//
        >`
      }
    </div>
    ${notice && html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>`}
    ${status.error && html`<${Notice} kind="error">Status: ${status.error.message}<//>`}
    ${
      s?.jobs.paused_all &&
      html`<${Notice} kind="warn"
        ><strong>All jobs are paused.</strong> No scheduled or watched run starts until you resume them; their slots are recorded as
        skipped.<//
      >`
    }
    <div class="overview-top">
      ${s ? html`<${StatusPanel} status=${s} />` : html`<div></div>`}
      <figure>
        <figcaption>Runs per day${stats.data && html`, last ${stats.data.days.length} days (${stats.data.timezone})`}</figcaption>
        ${stats.error && html`<${Notice} kind="error">${stats.error.message}<//>`}
        ${stats.data && html`<${RunsPerDay} stats=${stats.data} height=${170} />`}
      </figure>
    </div>
    <section aria-labelledby="in-progress">
      <h2 id="in-progress">Runs in progress</h2>
      <${RunsInProgress} runs=${running} zones=${Object.fromEntries((jobs.data?.jobs ?? []).map((job) => [job.name, job.timezone]))} />
    </section>
    <section aria-labelledby="jobs-title">
      <h2 id="jobs-title">Jobs</h2>
      ${jobs.error && html`<${Notice} kind="error">Jobs: ${jobs.error.message}<//>`}
      ${jobs.data && html`<${JobsTable} jobs=${jobs.data.jobs} spent=${s?.today.by_job ?? {}} />`}
    </section>
  `;
}

/** @param {{ status: StatusView }} props */
function StatusPanel({ status: s }) {
  const failures = s.today.failures;
  return html`<div>
    <p class="daemon">
      <span class="dot dot-up" aria-hidden="true"></span>
      countd ${s.version} is up: pid ${s.pid}, started <${Time} at=${s.started_at} zone=${s.timezone} />, up ${duration(s.uptime_s * 1000)}
    </p>
    <dl class="tiles">
      <div>
        <dt>Runs today</dt>
        <dd>${count(s.today.runs)}</dd>
      </div>
      <div class=${failures > 0 ? "bad" : ""}>
        <dt>Failures today</dt>
        <dd>${count(failures)}</dd>
      </div>
      <div>
        <dt>Tokens today</dt>
        <dd>${count(tokens(s.today.tokens))}<small> ${count(s.today.tokens.cachedInputTokens)} cached</small></dd>
      </div>
      <div>
        <dt>Spent today</dt>
        <dd>${usd(s.today.cost)}${s.today.unpriced > 0 && html`<small> + ${unpricedRuns(s.today.unpriced)}</small>`}</dd>
      </div>
      <div>
        <dt>Running / queued</dt>
        <dd>${s.running.length} / ${s.queued}</dd>
      </div>
      <div>
        <dt>Jobs</dt>
        <dd>
          ${s.jobs.loaded}<small> loaded${s.jobs.paused ? `, ${s.jobs.paused} paused` : ""}${s.jobs.invalid ? `, ${s.jobs.invalid} invalid` : ""}</small>
        </dd>
      </div>
      <div>
        <dt><a href="#/outbox">Outbox</a></dt>
        <dd>
          ${s.outbox.pending}<small> pending</small> · <span class=${s.outbox.dead > 0 ? "error-text" : ""}>${s.outbox.dead}</span
          ><small> dead</small>
        </dd>
      </div>
    </dl>
  </div>`;
}

/**
 * Runs in progress, built from the live messages alone: the replay after each (re)subscription
 * holds everything a run produced so far. `onChange` is told when runs start or end, and when the
 * outbox changes, for the counts that come from the API.
 * @param {() => void} onChange
 */
function useRunsInProgress(onChange) {
  const [runs, setRuns] = useState(/** @type {Map<string, LiveRun>} */ (new Map()));
  const changed = useDebounced(onChange, 300);
  useLive({}, (m) => {
    if (m.type === "reset") {
      setRuns(new Map());
      if (m.reconnected) changed();
      return;
    }
    if (m.type === "delivery" || m.type === "run_finished" || m.type === "run_started") changed();
    if (m.type === "live" || m.type === "delivery") return;
    setRuns((previous) => {
      const next = new Map(previous);
      const run = next.get(m.run_id);
      if (m.type === "run_started")
        next.set(m.run_id, {
          id: m.run_id,
          job: m.job,
          reason: m.run.reason,
          node: m.node,
          started_at: m.run.startedAt,
          iteration: 0,
          tokens: 0,
          cost: m.run.cost === null ? null : 0,
          text: "",
        });
      else if (m.type === "run_finished") next.delete(m.run_id);
      else if (run) next.set(m.run_id, progress(run, m));
      return next;
    });
  });
  return [...runs.values()];
}

/**
 * A run in progress as the overview shows it, added up from its live messages.
 * @typedef {{
 *   id: string;
 *   job: string;
 *   reason: RunReason;
 *   node: string | undefined;
 *   started_at: string;
 *   iteration: number;
 *   tokens: number;
 *   cost: number | null;
 *   text: string;
 *   tool?: string;
 *   lastTool?: string;
 * }} LiveRun
 */

/**
 * @param {LiveRun} run
 * @param {PageMessage} m
 * @returns {LiveRun}
 */
function progress(run, m) {
  switch (m.type) {
    case "iteration":
      return { ...run, iteration: m.iteration, text: "" };
    case "stream":
      return { ...run, text: (run.text + m.content).slice(-TAIL_CHARS) };
    case "tool_start":
      return { ...run, tool: m.name };
    case "tool_result":
      return { ...run, tool: undefined, lastTool: `${m.name} ${m.error ? "failed" : "done"} in ${duration(m.duration_ms)}` };
    case "llm":
      return { ...run, tokens: run.tokens + tokens(m.usage), cost: addCost(run.cost, m.cost) };
    default:
      return run;
  }
}

/**
 * `zones`: each job's time zone, which its run's start is shown in.
 * @param {{ runs: LiveRun[]; zones: Record<string, string> }} props
 */
function RunsInProgress({ runs, zones }) {
  if (runs.length === 0) return html`<p class="empty">No run in progress.</p>`;
  return html`<ul class="live-runs">
    ${runs.map(
      (run) =>
        html`<li key=${run.id} class="live-run">
          <div class="live-run-head">
            <span class="dot dot-running" aria-hidden="true"></span>
            <a href=${jobHref(run.job)}>${run.job}</a>
            <a href=${runHref(run.job, run.id)} class="mono">${run.id}</a>
            <span class="muted">${run.reason}${run.node !== undefined ? ` on ${run.node}` : ""}, started <${Time} at=${run.started_at} zone=${zones[run.job]} />, iteration ${run.iteration}, ${count(run.tokens)} tokens, ${usd(run.cost)}</span>
          </div>
          ${(run.tool || run.lastTool) && html`<div class="live-run-tool muted">${run.tool ? `calling ${run.tool}…` : run.lastTool}</div>`}
          ${run.text && html`<div class="answer live">${run.text}</div>`}
        </li>`,
    )}
  </ul>`;
}

/** @param {{ jobs: JobView[]; spent: Record<string, Spend> }} props */
function JobsTable({ jobs, spent }) {
  if (jobs.length === 0) return html`<p class="empty">No job files in the jobs folder.</p>`;
  return html`<div class="table-wrap">
    <table class="jobs">
      <thead>
        <tr>
          <th scope="col">Job</th>
          <th scope="col">Trigger</th>
          <th scope="col">Time zone</th>
          <th scope="col">Next fires</th>
          <th scope="col">Last run</th>
          <th scope="col" class="num">Spent today</th>
          <th scope="col">State</th>
        </tr>
      </thead>
      <tbody>
        ${jobs.map((job) => html`<${JobRow} key=${job.file} job=${job} spent=${spent[job.name]} />`)}
      </tbody>
    </table>
  </div>`;
}

/** @param {{ job: JobView; spent: Spend | undefined }} props */
function JobRow({ job, spent }) {
  const last = job.last_run;
  return html`
    <tr class=${job.problems.length ? "has-problems" : ""}>
      <th scope="row">
        <a href=${jobHref(job.name)}>${job.name}</a>
        ${job.description && html`<div class="muted small description">${job.description}</div>`}
      </th>
      <td>${job.trigger}</td>
      <td>${job.timezone}</td>
      ${
        job.loaded
          ? html`<td>
                ${
                  job.next_fires.length === 0
                    ? html`<span class="muted">–</span>`
                    : html`<ul class="fires">
                        ${job.next_fires.map((at) => html`<li><time datetime=${at}>${fireText(at, job.timezone)}</time></li>`)}
                      </ul>`
                }
              </td>
              <td>
                ${
                  last
                    ? html`<a href=${runHref(job.name, last.id)}><${Status} status=${last.status} /></a>
                        <span class="muted small" title=${last.startedAt}>${ago(last.startedAt)}</span>`
                    : html`<span class="muted">never</span>`
                }
              </td>`
          : html`<td colspan="2" class="not-loaded">not loaded: ${job.not_loaded}</td>`
      }
      <td class="num">
        ${
          spent
            ? html`${usd(spent.cost)}
                <div class="muted small" title=${usageText(spent.tokens)}>
                  ${count(tokens(spent.tokens))} tokens${spent.unpriced > 0 ? `, ${unpricedRuns(spent.unpriced)}` : ""}
                </div>`
            : html`<span class="muted">–</span>`
        }
      </td>
      <td>
        ${!job.loaded ? html`<span class="badge badge-bad">invalid</span>` : job.paused ? html`<span class="badge badge-warn">paused</span>` : job.enabled ? html`<span class="badge">active</span>` : html`<span class="badge">disabled</span>`}
      </td>
    </tr>
    ${
      job.problems.length > 0 &&
      html`<tr class="problems-row">
        <td colspan="7">
          <strong
            >${job.loaded ? `${job.file} has problems (the job keeps its last good version):` : `${job.file} is invalid and loaded no job:`}</strong
          >
          <ul class="problems">
            ${job.problems.map((problem) => html`<li>${problem}</li>`)}
          </ul>
        </td>
      </tr>`
    }
  `;
}

/** Runs whose model has no price: their cost is not in the sum beside. */
/** @param {number} n */
const unpricedRuns = (n) => `${n} unpriced run${n === 1 ? "" : "s"}`;
