// @ts-check
import uPlot from "/assets/vendor/uplot.js";
import { useEffect, useRef } from "/assets/vendor/preact-hooks.js";
import { clock, count, duration, html, usd } from "./ui.js";

/**
 * @typedef {import("../src/console/protocol.js").StatsView} StatsView
 * @typedef {import("../src/console/protocol.js").RunStatus} RunStatus
 * @typedef {Omit<uPlot.Options, "width" | "height">} ChartOptions
 */

/**
 * Statuses from the bottom of a day's bar to its top: the good news first.
 * @type {RunStatus[]}
 */
const STACK = ["ok", "error", "budget", "timeout", "interrupted", "cancelled", "skipped", "waiting", "running"];
const HEIGHT = 200;

/** @param {string} name */
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
const dayFormat = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
/** @param {string | undefined} date */
const dayLabel = (date) => (date ? dayFormat.format(Date.parse(`${date}T12:00:00Z`)) : "");

/** Whole numbers only: runs and tokens come in ones. */
const WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

/**
 * A uPlot chart that fills its box's width, drawn again only when `source` (the API's answer) is a
 * new one, not on every render of a screen that streams. Canvas colours cannot follow CSS by
 * themselves, so it is also drawn again when the colour scheme changes; `make()` reads them each time.
 * @param {{ make: () => ChartOptions; data: uPlot.AlignedData; label: string; source: unknown; height?: number }} props
 */
function Chart({ make, data, label, source, height = HEIGHT }) {
  const box = useRef(/** @type {HTMLDivElement | null} */ (null));
  useEffect(() => {
    const element = /** @type {HTMLDivElement} */ (box.current);
    /** @type {uPlot | undefined} */
    let plot;
    const size = () => ({ width: Math.max(element.clientWidth, 200), height });
    const draw = () => {
      plot?.destroy();
      plot = new uPlot({ ...make(), ...size() }, data, element);
    };
    draw();
    const resize = new ResizeObserver(() => plot?.setSize(size()));
    resize.observe(element);
    const scheme = matchMedia("(prefers-color-scheme: dark)");
    scheme.addEventListener("change", draw);
    return () => {
      resize.disconnect();
      scheme.removeEventListener("change", draw);
      plot?.destroy();
    };
  }, [source]);
  return html`<div class="chart" ref=${box} role="img" aria-label=${label}></div>`;
}

/**
 * @param {uPlot.Axis} [extra]
 * @returns {uPlot.Axis}
 */
const axis = (extra) => ({ stroke: css("--muted"), grid: { stroke: css("--grid"), width: 1 }, ticks: { show: false }, ...extra });

/**
 * Runs per day by status (GET /api/stats), as stacked bars.
 * @param {{ stats: StatsView; height?: number }} props
 */
export function RunsPerDay({ stats, height }) {
  const { days } = stats;
  const shown = STACK.filter((status) => days.some((day) => day.by_status[status]));
  if (shown.length === 0) return html`<p class="empty">No runs in the last ${days.length} days.</p>`;
  // uPlot has no stacking: each series is the running total up to its status, and the tallest is drawn first so the others paint over it.
  /** @type {Array<[RunStatus, number[]]>} */
  const totals = [];
  /** @type {Partial<Record<RunStatus, number[]>>} */
  const raw = {};
  let below = days.map(() => 0);
  for (const status of shown) {
    const values = days.map((day) => day.by_status[status] ?? 0);
    raw[status] = values;
    below = below.map((sum, i) => sum + (values[i] ?? 0));
    totals.push([status, below]);
  }
  totals.reverse();
  // A zero would still draw a hairline bar.
  const data = [days.map((_, i) => i), ...totals.map(([, values]) => values.map((v) => v || null))];
  /** @param {RunStatus} status */
  const sum = (status) => (raw[status] ?? []).reduce((a, b) => a + b, 0);
  const sums = shown.map((status) => `${count(sum(status))} ${status}`).join(", ");
  /** @returns {ChartOptions} */
  const make = () => ({
    scales: {
      x: { time: false, range: (_u, min, max) => [min - 0.5, max + 0.5] },
      y: { range: (_u, _min, max) => [0, Math.max(2, Math.ceil(max * 1.1))] },
    },
    axes: [
      axis({ grid: { show: false }, incrs: [1, 2, 7, 14, 30], values: (_u, splits) => splits.map((i) => dayLabel(days[i]?.date)) }),
      axis({ incrs: WHOLE, size: 40 }),
    ],
    series: [
      // Away from the bars the legend gives the totals over all the days.
      { label: "Day", value: (_u, i) => (i === null ? `all ${days.length}` : (days[i]?.date ?? "")) },
      ...totals.map(
        ([status]) =>
          /** @satisfies {uPlot.Series} */ ({
            label: status,
            fill: css(`--status-${status}`),
            stroke: css(`--status-${status}`),
            paths: uPlot.paths.bars?.({ size: [0.7, 48] }),
            points: { show: false },
            value: (_u, _v, _s, i) => count(i === null ? sum(status) : raw[status]?.[i]),
          }),
      ),
    ],
    cursor: { points: { show: false } },
  });
  return html`<${Chart}
    source=${stats}
    height=${height}
    make=${make}
    data=${data}
    label=${`Runs per day over the last ${days.length} days (${stats.timezone}): ${sums}`}
  />`;
}

/**
 * What RunTrend draws of each run; runs and tokens come in ones, durations and dollars do not.
 * @typedef {"duration_ms" | "tokens" | "cost"} TrendField
 * @type {Record<TrendField, { name: string; format: (value: number | null | undefined) => string; incrs?: number[] }>}
 */
const TRENDS = {
  duration_ms: { name: "Duration", format: duration },
  tokens: { name: "Tokens", format: count, incrs: WHOLE },
  cost: { name: "Cost", format: usd },
};

/**
 * The time axis (seconds) from the first run to the last, or two hours around runs closer than
 * that: left to itself, uPlot widens a single run's range to a thousand days (its day is counted
 * in milliseconds), so the axis read 2027, 2028, 2029.
 * @param {number[]} times
 * @returns {uPlot.Range.MinMax}
 */
function atLeastTwoHours(times) {
  const span = 2 * 3600;
  const first = times[0] ?? 0;
  const last = times.at(-1) ?? first;
  if (last - first >= span) return [first, last];
  const middle = (first + last) / 2;
  return [middle - span / 2, middle + span / 2];
}

/**
 * One value of each finished run over time: its duration, its tokens or its cost (none for a run with no price).
 * @param {{ runs: StatsView["runs"]; field: TrendField }} props
 */
export function RunTrend({ runs, field }) {
  if (runs.length === 0) return html`<p class="empty">No finished runs yet.</p>`;
  const { name, format, incrs } = TRENDS[field];
  // An unpriced run, or one recorded before pricing, is a gap in the line, not a zero.
  const values = runs.map((run) => (typeof run[field] === "number" ? run[field] : null));
  const known = values.filter((value) => value !== null);
  const times = runs.map((run) => Date.parse(run.started_at) / 1000);
  if (known.length === 0) return html`<p class="empty">None of these runs has a price.</p>`;
  /** @type {uPlot.AlignedData} */
  const data = [times, values];
  const last = runs.length - 1;
  /** @returns {ChartOptions} */
  const make = () => ({
    scales: { x: { range: () => atLeastTwoHours(times) }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.15 : 1] } },
    axes: [
      axis({ grid: { show: false }, space: 90 }),
      axis({ size: 64, values: (_u, splits) => splits.map(format), ...(incrs ? { incrs } : {}) }),
    ],
    // Away from the points the legend shows the latest run.
    series: [
      { label: "Run", value: (_u, _v, _s, i) => clock(runs[i ?? last]?.started_at ?? "") },
      {
        label: name,
        stroke: css("--accent"),
        width: 2,
        points: { show: true, size: 6, fill: css("--accent") },
        value: (_u, _v, _s, i) => format(runs[i ?? last]?.[field]),
      },
    ],
  });
  const label = `${name} of the last ${runs.length} finished runs: from ${format(Math.min(...known))} to ${format(Math.max(...known))}`;
  return html`<${Chart} source=${runs} make=${make} data=${data} label=${label} />`;
}
