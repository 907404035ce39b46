import { describe, expect, it } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import { renderPrompt, unknownPlaceholders } from "../../src/jobs/template.js";
import type { Job } from "../../src/jobs/types.js";

const job: Job = {
  name: "daily-report",
  file: "/srv/countd/jobs/daily-report.yaml",
  description: "Morning summary",
  timezone: "Asia/Shanghai",
  prompt: "",
  ...jobDefaults(),
};

// 20:30 UTC on 30 November is already 1 December in Shanghai.
const now = new Date("2026-11-30T20:30:05Z");

const render = (template: string, extra: { timezone?: string; files?: string[]; job?: Job; now?: Date } = {}) =>
  renderPrompt(template, {
    clock: { at: extra.now ?? now, timeZone: extra.timezone ?? "Asia/Shanghai" },
    job: extra.job ?? job,
    runId: "r-42",
    ...(extra.files ? { files: extra.files } : {}),
  });

describe("renderPrompt", () => {
  it("fills in the date and time in the job's timezone", () => {
    expect(render("{{date}} {{time}} / {{datetime}}")).toBe("2026-12-01 04:30 / 2026-12-01T04:30:05+08:00");
    expect(render("{{date}} {{time}} / {{datetime}}", { timezone: "UTC" })).toBe("2026-11-30 20:30 / 2026-11-30T20:30:05+00:00");
  });

  it("shows the offset in force on the day, across daylight saving time", () => {
    expect(render("{{datetime}}", { timezone: "America/New_York", now: new Date("2026-07-01T12:00:00Z") })).toBe(
      "2026-07-01T08:00:00-04:00",
    );
    expect(render("{{datetime}}", { timezone: "America/New_York", now: new Date("2026-12-01T12:00:00Z") })).toBe(
      "2026-12-01T07:00:00-05:00",
    );
    expect(render("{{time}}", { timezone: "Asia/Kolkata", now: new Date("2026-12-01T00:00:00Z") })).toBe("05:30");
  });

  it("writes midnight as 00:00", () => {
    expect(render("{{time}}", { timezone: "UTC", now: new Date("2026-12-01T00:00:00Z") })).toBe("00:00");
  });

  it("fills in the job and the run, with spaces inside the braces allowed", () => {
    expect(render("{{job.name}}: {{ job.description }} ({{run.id}})")).toBe("daily-report: Morning summary (r-42)");
    const { description: _none, ...withoutDescription } = job;
    expect(render("[{{job.description}}]", { job: withoutDescription })).toBe("[]");
  });

  it("lists the changed files one per line", () => {
    expect(render("Files:\n{{files}}", { files: ["inbox/a.csv", "inbox/b.csv"] })).toBe("Files:\ninbox/a.csv\ninbox/b.csv");
    expect(render("Files: {{files}}")).toBe("Files: (none)");
  });

  it("lists at most 100 files, then how many more there are", () => {
    const files = Array.from({ length: 105 }, (_, i) => `inbox/${i}.csv`);
    const lines = render("{{files}}", { files }).split("\n");
    expect(lines).toHaveLength(101);
    expect(lines[99]).toBe("inbox/99.csv");
    expect(lines[100]).toBe("… and 5 more");
    expect(render("{{files}}", { files: files.slice(0, 100) }).split("\n")).toHaveLength(100);
  });

  it("does not expand placeholders inside the values it fills in", () => {
    expect(render("{{files}} {{job.description}}", { files: ["{{date}}.csv"], job: { ...job, description: "{{run.id}}" } })).toBe(
      "{{date}}.csv {{run.id}}",
    );
  });

  it("leaves an unknown placeholder as written", () => {
    expect(render("{{owner}} on {{date}}")).toBe("{{owner}} on 2026-12-01");
  });
});

describe("unknownPlaceholders", () => {
  it("finds each unknown placeholder with its index", () => {
    expect(unknownPlaceholders("{{date}} {{ owner }} {{job.name}} {{}}")).toEqual([
      { text: "{{ owner }}", index: 9 },
      { text: "{{}}", index: 34 },
    ]);
    expect(unknownPlaceholders("{{date}}{{time}}{{datetime}}{{job.name}}{{job.description}}{{run.id}}{{files}}")).toEqual([]);
  });
});

describe("renderPrompt's {{upstream.…}}", () => {
  const follower: Job = { ...job, after: { job: "collect", statuses: ["ok"] } };
  const upstream = {
    run: {
      job: "collect",
      runId: "r-41",
      status: "ok" as const,
      answer: '{"items":[{"id":7}]}',
      output: { items: [{ id: 7, tags: ["a"] }] },
    },
    framed: (text: string) => `<<${text}>>`,
  };
  const fill = (template: string, vars: Partial<Parameters<typeof renderPrompt>[1]> = {}) =>
    renderPrompt(template, { clock: { at: now, timeZone: "UTC" }, job: follower, runId: "r-42", upstream, ...vars });

  it("frames what the upstream's model wrote and picks parts of its output by path", () => {
    expect(fill("{{upstream.job}} {{upstream.run_id}} {{upstream.status}}")).toBe("collect r-41 ok");
    expect(fill("{{upstream.answer}}")).toBe('<<{"items":[{"id":7}]}>>');
    expect(fill("{{ upstream.output.items[0].id }} {{upstream.output.items[0].tags}} {{upstream.output.nothing}}")).toBe(
      '<<7>> <<["a"]>> (none)',
    );
    expect(fill("{{upstream.output}}")).toBe('<<{"items":[{"id":7,"tags":["a"]}]}>>');
  });

  it("shows (none) in a follower run by hand, and leaves them as written in a job without after:", () => {
    expect(fill("[{{upstream.answer}}]", { upstream: undefined })).toBe("[(none)]");
    expect(fill("[{{upstream.answer}}]", { upstream: undefined, job })).toBe("[{{upstream.answer}}]");
  });

  it("knows them only in a job with after:", () => {
    expect(unknownPlaceholders("{{upstream.answer}}")).toEqual([
      { text: "{{upstream.answer}}", index: 0, why: "only a job with after: has an upstream run" },
    ]);
    expect(unknownPlaceholders("{{upstream.answer}} {{upstream.output.items[0].id}} {{upstream.other}}", true)).toEqual([
      { text: "{{upstream.other}}", index: 52 },
    ]);
  });
});
