/**
 * HTML conversion of attack pages: time per page and the event loop's longest delay meanwhile,
 * converted on the main thread (as web_fetch did before) beside the conversion worker with its
 * time limit (as it does now). Pages are sized so the main-thread form finishes in seconds.
 */
import { setTimeout } from "node:timers/promises";
import { htmlConverter } from "../src/html/convert.js";
import { htmlToReadable, type HtmlFormat } from "../src/html/readable.js";

export interface HtmlBenchRow {
  page: string;
  kb: number;
  mainThreadMs: number;
  mainThreadLagMs: number;
  workerMs: number;
  workerLagMs: number;
  workerOutcome: "converted" | "stopped";
}

const PAGES: Record<string, { html: string; format: HtmlFormat }> = {
  "nested blockquotes": { html: "<blockquote>".repeat(2_000), format: "markdown" },
  "unclosed divs, as text": { html: "<div>x".repeat(1_000), format: "text" },
  "unclosed spans": { html: "<span>x".repeat(1_000), format: "markdown" },
  "unclosed <b><i>": { html: "<b><i>x".repeat(700), format: "markdown" },
  "nested lists": { html: "<ul><li>a".repeat(800), format: "text" },
  "deep tables": { html: "<table><tr><td>".repeat(13_000), format: "markdown" },
  "many attributes": { html: `<p ${'a="1" '.repeat(30_000)}>x</p>`, format: "markdown" },
};

/** web_fetch's default limit. */
const TIMEOUT_MS = 10_000;

const PROBE_MS = 5;

/** The lag is the longest gap between ticks of a 5 ms interval beyond its 5 ms. */
async function measure(work: () => Promise<unknown>): Promise<{ ms: number; lagMs: number; ok: boolean }> {
  let last = performance.now();
  let lagMs = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    lagMs = Math.max(lagMs, now - last - PROBE_MS);
    last = now;
  }, PROBE_MS);
  // Let the probe tick before the work can block it, and once more after.
  await setTimeout(2 * PROBE_MS);
  const start = performance.now();
  const ok = await work().then(
    () => true,
    () => false,
  );
  const ms = performance.now() - start;
  await setTimeout(2 * PROBE_MS);
  clearInterval(probe);
  return { ms, lagMs, ok };
}

export async function benchHtml(): Promise<HtmlBenchRow[]> {
  // The worker's start-up is paid once per daemon, not per page.
  await htmlConverter.convert("<p>warm-up</p>", "markdown", { timeoutMs: TIMEOUT_MS });
  const rows: HtmlBenchRow[] = [];
  for (const [page, { html, format }] of Object.entries(PAGES)) {
    const before = await measure(async () => htmlToReadable(html, format));
    const after = await measure(() => htmlConverter.convert(html, format, { timeoutMs: TIMEOUT_MS }));
    rows.push({
      page,
      kb: html.length / 1024,
      mainThreadMs: before.ms,
      mainThreadLagMs: before.lagMs,
      workerMs: after.ms,
      workerLagMs: after.lagMs,
      workerOutcome: after.ok ? "converted" : "stopped",
    });
  }
  await htmlConverter.close();
  return rows;
}
