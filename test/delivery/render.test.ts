import { describe, expect, it } from "vitest";
import type { DeliveryMessage } from "../../src/delivery/message.js";
import { messageMarkdown, renderMarkdown, renderTemplate } from "../../src/delivery/render.js";

const failed: DeliveryMessage = {
  kind: "run.failed",
  job: "daily-report",
  run: {
    id: "20260301T090000Z-ab12",
    reason: "schedule",
    status: "timeout",
    startedAt: "2026-03-01T09:00:00.000Z",
    finishedAt: "2026-03-01T09:10:00.000Z",
    durationMs: 600_000,
    usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, cacheWriteTokens: 0 },
    cost: 0.0001,
  },
  result: "Partial answer.",
  error: "run timed out after 10m; ``` a fence in the error",
  lastToolCalls: [
    { name: "read_file", status: "ok", summary: "reports/sales.csv (2 KB)" },
    { name: "exec", status: "error", summary: "python3 build.py → exit 1" },
  ],
};

describe("renderMarkdown", () => {
  it("removes scripts, event handlers and javascript: links from the answer", async () => {
    const { html, text } = await renderMarkdown(
      [
        "Hello <script>alert('script')</script>",
        '<img src="x.png" onerror="alert(\'onerror\')">',
        "[click me](javascript:alert('link'))",
        '<a href="JaVaScRiPt:alert(1)" onclick="steal()">mixed case</a>',
      ].join("\n\n"),
    );
    for (const part of [html, text]) {
      expect(part).not.toMatch(/<script|alert|onerror|onclick|javascript:/i);
    }
    expect(html).toContain("click me");
    expect(html).toContain("mixed case");
  });

  it("keeps tables, code and http links, with a plain-text version of the same content", async () => {
    const { html, text } = await renderMarkdown(
      "# Sales\n\n| region | total |\n|---|---:|\n| north | 12 |\n\n```\nif (a < b) run();\n```\n\nSee [the dashboard](https://dash.example.com/sales).",
    );
    expect(html).toContain("<h1>Sales</h1>");
    expect(html).toMatch(/<table>[\s\S]*<td>north<\/td>[\s\S]*<\/table>/);
    expect(html).toContain("<pre><code>if (a &lt; b) run();");
    expect(html).toContain('<a href="https://dash.example.com/sales">the dashboard</a>');
    expect(text).toContain("north");
    expect(text).toContain("if (a < b) run();");
    expect(text).toContain("[the dashboard](https://dash.example.com/sales)");
    expect(text).not.toMatch(/<\/?[a-z]+[ >]/);
  });
});

describe("messageMarkdown", () => {
  it("adds the error and the last tool calls to a failed run's answer, inside code blocks", async () => {
    const { html } = await renderMarkdown(messageMarkdown(failed));
    expect(html).toContain("Partial answer.");
    expect(html).toContain("20260301T090000Z-ab12 timeout");
    const blocks = [...html.matchAll(/<pre><code>([\s\S]*?)<\/code><\/pre>/g)].map((m) => m[1]);
    expect(blocks[0]).toContain("run timed out after 10m; ``` a fence in the error");
    expect(blocks[1]).toContain("read_file  reports/sales.csv (2 KB)");
    expect(blocks[1]).toContain("error  exec  python3 build.py → exit 1");
  });

  it("names the failed run and how to see it", () => {
    expect(messageMarkdown(failed)).toContain("See the whole run with `countd show 20260301T090000Z-ab12 --job daily-report`.");
  });

  it("names the run's page in the console after countd show when the daemon serves a console, and only then", () => {
    const url = "http://127.0.0.1:7420/#/runs/daily-report/20260301T090000Z-ab12";
    expect(messageMarkdown({ ...failed, consoleUrl: url })).toContain(
      `See the whole run with \`countd show 20260301T090000Z-ab12 --job daily-report\`, or open ${url}`,
    );
    expect(messageMarkdown(failed)).not.toContain("open http");
  });

  it("is just the answer for a completed run", () => {
    expect(messageMarkdown({ ...failed, kind: "run.completed", run: { ...failed.run, status: "ok" } })).toBe("Partial answer.");
  });
});

describe("renderTemplate", () => {
  const vars = {
    job: "daily-report",
    runId: "20260301T233000Z-ab12",
    status: "ok",
    clock: { at: new Date("2026-03-01T23:30:00Z"), timeZone: "Asia/Shanghai" },
  };

  it("fills every placeholder, with date and time in the given time zone", () => {
    expect(renderTemplate("{{job.name}} {{ date }} {{time}} {{status}} {{run.id}}", vars)).toBe(
      "daily-report 2026-03-02 07:30 ok 20260301T233000Z-ab12",
    );
    expect(renderTemplate("{{date}} {{time}}", { ...vars, clock: { ...vars.clock, timeZone: "America/New_York" } })).toBe(
      "2026-03-01 18:30",
    );
  });

  it("leaves unknown placeholders alone and never expands a value a second time", () => {
    expect(renderTemplate("{{weather}} {{job.name}}", { ...vars, job: "{{date}}" })).toBe("{{weather}} {{date}}");
  });
});
