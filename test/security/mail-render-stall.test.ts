import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../../src/delivery/render.js";

/**
 * Answers that quote a hostile page: markdown and raw HTML that the mail's converters (marked,
 * sanitize-html, node-html-markdown) handle in far more than linear time. On the main thread each
 * stalled the event loop for 0.4 to 1.4 s (measured on this machine), and every cron fire,
 * delivery and SIGTERM waited that long.
 */
const HOSTILE_ANSWERS: Record<string, string> = {
  "nested blockquote tags": "<blockquote>".repeat(2_000),
  "deeply nested markdown quotes": Array.from({ length: 200 }, (_, i) => `${">".repeat(i + 1)} x`).join("\n"),
  "deeply nested markdown list": Array.from({ length: 300 }, (_, i) => `${"  ".repeat(i)}- x`).join("\n"),
  "unclosed divs": "<div>x".repeat(2_000),
};

describe("attack: an answer whose mail is slow to render", () => {
  it("never blocks the event loop: it is busy for under 100 ms while each mail is rendered", { timeout: 120_000 }, async () => {
    // The worker's start and the first call's module loading are not what is measured.
    await renderMarkdown("warm-up");
    const busyMs: Record<string, number> = {};
    for (const [name, markdown] of Object.entries(HOSTILE_ANSWERS)) {
      const before = performance.eventLoopUtilization();
      const { html, text } = await renderMarkdown(markdown);
      busyMs[name] = performance.eventLoopUtilization(before).active;
      expect(html.length + text.length, name).toBeGreaterThan(0);
    }
    expect(Object.entries(busyMs).filter(([, ms]) => ms >= 100)).toEqual([]);
  });

  it(
    "sends the answer as escaped preformatted text when rendering takes too long, so the mail still goes out",
    { timeout: 60_000 },
    async () => {
      // About 4 s to render here, eight times the limit.
      const markdown = `${Array.from({ length: 600 }, (_, i) => `${"  ".repeat(i)}- x`).join("\n")}\n\n<script>alert(1)</script>`;
      const { html, text } = await renderMarkdown(markdown, 500);
      expect(text === markdown, "the text body is the answer itself").toBe(true);
      expect(html.slice(0, 12)).toBe("<pre>- x\n  -");
      expect(html).not.toContain("<script");
      expect(html.endsWith("\n\n&#60;script&#62;alert(1)&#60;/script&#62;</pre>"), html.slice(-60)).toBe(true);
    },
  );

  it("renders an ordinary answer as before", async () => {
    const { html, text } = await renderMarkdown("# Sales\n\n**up 4%**");
    expect(html).toBe("<h1>Sales</h1>\n<p><strong>up 4%</strong></p>");
    expect(text).toBe("# Sales\n\n**up 4%**");
  });
});
