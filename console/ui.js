// @ts-check
import { h } from "/assets/vendor/preact.js";
import { useCallback, useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import htm from "/assets/vendor/htm.js";

/**
 * What every screen shares: htm bound to Preact, the formats of times, durations and tokens, and a
 * few small components. Every string from the daemon is rendered as text (Preact makes text nodes),
 * so agent output can only become HTML where a screen asks for the server's sanitised `html`.
 */
export const html = htm.bind(h);

/**
 * @typedef {import("../src/console/protocol.js").RunRecord} RunRecord
 * @typedef {import("../src/console/protocol.js").Usage} Usage
 * @typedef {import("/assets/vendor/preact.js").ComponentChildren} ComponentChildren
 */

/** @param {string} job */
export const jobHref = (job) => `#/jobs/${encodeURIComponent(job)}`;
/**
 * @param {string} job
 * @param {string} id
 */
export const runHref = (job, id) => `#/runs/${encodeURIComponent(job)}/${encodeURIComponent(id)}`;

const clockFormat = new Intl.DateTimeFormat(undefined, {
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: "h23",
});
const yearClockFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
});
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const number = new Intl.NumberFormat();
const dollars = new Intl.NumberFormat(undefined, {
  style: "currency",
  currency: "USD",
  minimumFractionDigits: 2,
  maximumFractionDigits: 2,
});
/** A run's cost is often a fraction of a cent: its first digits say more than a row of zeros. */
const cents = new Intl.NumberFormat(undefined, { style: "currency", currency: "USD", maximumSignificantDigits: 3 });

/**
 * An instant in the browser's zone; the year only when it is not this one.
 * @param {string} iso
 */
export function clock(iso) {
  const date = new Date(iso);
  return (date.getFullYear() === new Date().getFullYear() ? clockFormat : yearClockFormat).format(date);
}

/**
 * "3 min ago", "in 2 h".
 * @param {string} iso
 */
export function ago(iso, now = Date.now()) {
  const seconds = (Date.parse(iso) - now) / 1000;
  const abs = Math.abs(seconds);
  if (abs < 45) return relative.format(Math.round(seconds), "second");
  if (abs < 2700) return relative.format(Math.round(seconds / 60), "minute");
  if (abs < 129_600) return relative.format(Math.round(seconds / 3600), "hour");
  return relative.format(Math.round(seconds / 86_400), "day");
}

/**
 * One formatter per zone: building one costs far more than formatting with it.
 * @type {Map<string, Intl.DateTimeFormat>}
 */
const zoneFormats = new Map();

/**
 * An instant as countd shows it everywhere (CLI, mail, here): local to `zone` with its offset,
 * "2026-12-07 09:00:05 -05:00". `zone`: the job's for a job's times, countd.yaml's for the
 * daemon's own; the API sends it beside the UTC instants. `seconds: false` leaves them out.
 * @param {string} iso
 * @param {string} [zone]
 */
export function zonedText(iso, zone, seconds = true) {
  const key = zone ?? "";
  let format = zoneFormats.get(key);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
      timeZoneName: "longOffset",
    });
    zoneFormats.set(key, format);
  }
  const p = Object.fromEntries(format.formatToParts(new Date(iso)).map((part) => [part.type, part.value]));
  const offset = (p.timeZoneName ?? "").replace(/^GMT/, "") || "+00:00";
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}${seconds ? `:${p.second}` : ""} ${offset}`;
}

/**
 * A job's next fire: seconds only when its schedule has them.
 * @param {string} iso
 * @param {string} zone
 */
export function fireText(iso, zone) {
  return zonedText(iso, zone, new Date(iso).getUTCSeconds() !== 0);
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return both(m, "min", Math.round(s % 60), "s");
  const hours = Math.floor(m / 60);
  if (hours < 48) return both(hours, "h", m % 60, "min");
  return both(Math.floor(hours / 24), "d", hours % 24, "h");
}

/**
 * "2 min 5 s", and "10 min" rather than "10 min 0 s".
 * @param {number} big
 * @param {string} bigUnit
 * @param {number} small
 * @param {string} smallUnit
 */
const both = (big, bigUnit, small, smallUnit) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);

/** @param {number | null | undefined} n */
export const count = (n) => number.format(n ?? 0);

/** @param {Usage | undefined} usage */
export const tokens = (usage) => (usage ? usage.inputTokens + usage.outputTokens : 0);

/**
 * "1,200 in (400 cached), 50 out": the cached input is always shown, so a user sees the prompt
 * cache work (or not); cache writes only when the provider reported some.
 * @param {Usage} usage
 */
export function usageText(usage) {
  const cache = [
    `${count(usage.cachedInputTokens)} cached`,
    usage.cacheWriteTokens > 0 && `${count(usage.cacheWriteTokens)} written to the cache`,
  ]
    .filter(Boolean)
    .join(", ");
  return `${count(usage.inputTokens)} in (${cache}), ${count(usage.outputTokens)} out`;
}

/**
 * USD: "$1.24", "$0.00312"; a model with no price is "unpriced", never "$0"; "–" for a run recorded before pricing.
 * @param {number | null | undefined} cost
 */
export function usd(cost) {
  if (cost === undefined) return "–";
  if (cost === null) return "unpriced";
  return (cost >= 1 || cost === 0 ? dollars : cents).format(cost);
}

/**
 * Tokens summed, as the live stream adds a run's calls up.
 * @param {Usage} sum
 * @param {Usage} usage
 * @returns {Usage}
 */
export const addUsage = (sum, usage) => ({
  inputTokens: sum.inputTokens + usage.inputTokens,
  outputTokens: sum.outputTokens + usage.outputTokens,
  cachedInputTokens: sum.cachedInputTokens + usage.cachedInputTokens,
  cacheWriteTokens: sum.cacheWriteTokens + usage.cacheWriteTokens,
});

/**
 * Costs summed, as the live stream adds a run's calls up: one unpriced call makes the sum unknown.
 * @param {number | null} sum
 * @param {number | null} cost
 * @returns {number | null}
 */
export const addCost = (sum, cost) => (sum === null || cost === null ? null : sum + cost);

/** @param {Pick<RunRecord, "startedAt" | "finishedAt">} run */
export function runDuration(run) {
  return run.finishedAt ? Date.parse(run.finishedAt) - Date.parse(run.startedAt) : undefined;
}

/**
 * `zone`: whose clock the time is read on (see zonedText); without one, the browser's, still with its offset.
 * @param {{ at: string | undefined; zone?: string }} props
 */
export function Time({ at, zone }) {
  if (!at) return "–";
  return html`<time datetime=${at} title=${at}>${zonedText(at, zone)}</time>`;
}

/**
 * A run's or a delivery's status: a word, coloured, never colour alone.
 * @param {{ status: string }} props
 */
export function Status({ status }) {
  return html`<span class=${`status status-${status}`}>${status}</span>`;
}

/**
 * What an action answered, or why a load failed; `role` lets screen readers hear it.
 * @typedef {"info" | "warn" | "error"} NoticeKind
 * @typedef {{ kind: NoticeKind; text: string }} NoticeText what a screen tells the user after an action
 * @param {{ kind?: NoticeKind; children?: ComponentChildren; onClose?: () => void }} props
 */
export function Notice({ kind = "info", children, onClose }) {
  return html`<div class=${`notice notice-${kind}`} role=${kind === "error" ? "alert" : "status"}>
    <span>${children}</span>
    ${onClose && html`<button type="button" class="link" onClick=${onClose} aria-label="Dismiss">×</button>`}
  </div>`;
}

/**
 * @template T
 * @typedef {{ data?: T; error?: Error; reload: () => Promise<unknown> }} Resource
 */

/**
 * Data from the API for a screen: loaded when `deps` change, again on `reload()`. An answer that
 * arrives after a newer request was made (the user moved on) is dropped.
 * @template T
 * @param {() => Promise<T>} load
 * @param {unknown[]} deps
 * @returns {Resource<T>}
 */
export function useResource(load, deps) {
  const [result, setResult] = useState(/** @type {{ data?: T; error?: Error }} */ ({}));
  const generation = useRef(0);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    return load().then(
      (data) => mine === generation.current && setResult({ data }),
      (error) => mine === generation.current && setResult((previous) => ({ data: previous.data, error })),
    );
  }, deps);
  useEffect(() => {
    setResult({});
    reload();
  }, [reload]);
  return { ...result, reload };
}

/**
 * Calls `fn` once, `ms` after the last of a burst of calls: live messages come many at a time.
 * @param {() => unknown} fn
 * @param {number} ms
 */
export function useDebounced(fn, ms) {
  const latest = useRef(fn);
  latest.current = fn;
  const timer = useRef(/** @type {ReturnType<typeof setTimeout> | undefined} */ (undefined));
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => latest.current(), ms);
  }, [ms]);
}

/**
 * What a button's action came to: its answer, or why it failed.
 * @template T
 * @typedef {{ ok: true; value: T; error?: undefined } | { ok: false; error: Error; value?: undefined }} ActionResult
 */

/**
 * A button that POSTs: disabled while its request is out, so a double click is one change. `act`
 * returns what to tell the user, or throws.
 * @template T
 * @param {{
 *   act: () => Promise<T>;
 *   onDone?: (result: ActionResult<T>) => void;
 *   class?: string;
 *   children?: ComponentChildren;
 *   label?: string;
 * }} props
 */
export function ActionButton({ act, onDone, class: className = "", children, label }) {
  const [busy, setBusy] = useState(false);
  const click = async () => {
    setBusy(true);
    try {
      onDone?.({ ok: true, value: await act() });
    } catch (error) {
      onDone?.({ ok: false, error: error instanceof Error ? error : new Error(String(error)) });
    } finally {
      setBusy(false);
    }
  };
  return html`<button type="button" class=${className} onClick=${click} disabled=${busy} aria-busy=${busy} aria-label=${label}>
    ${children}
  </button>`;
}
