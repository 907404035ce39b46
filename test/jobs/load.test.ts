import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { glob } from "tinyglobby";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { displayPath, loadJobFile, loadJobsDir, MAX_JOB_NESTING, MAX_PROBLEMS_PER_FILE, type JobContext } from "../../src/jobs/load.js";
import { MAX_JOB_FILE_BYTES } from "../../src/jobs/read-bounded.js";
import { validateJobs } from "../../src/jobs/validate.js";
import type { Job } from "../../src/jobs/types.js";

let root: string;
let jobsDir: string;
let workspace: string;
let ctx: JobContext;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-jobs-"));
  jobsDir = path.join(root, "jobs");
  workspace = path.join(root, "workspace");
  await mkdir(jobsDir);
  await mkdir(path.join(workspace, "inbox"), { recursive: true });
  ctx = {
    workspace,
    defaultTimezone: "Europe/Berlin",
    knownTools: ["read_file", "list_dir", "write_file"],
    jobEnv: ["COUNTD_WEBHOOK_SECRET", "API_TOKEN", "SLACK_HOOK_URL", "OPS_EMAIL"],
  };
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function writeJob(name: string, text: string): Promise<string> {
  const file = path.join(jobsDir, name);
  await writeFile(file, text);
  return file;
}

async function load(text: string, name = "job.yaml"): Promise<{ job?: Job; problems: string[] }> {
  return loadJobFile(await writeJob(name, text), ctx);
}

/** The problems of one file, with the file's path cut down to its name. */
async function problems(text: string, name = "job.yaml"): Promise<string[]> {
  const result = await load(text, name);
  expect(result.job).toBeUndefined();
  return result.problems.map((line) => line.replace(`${jobsDir}${path.sep}`, ""));
}

describe("loadJobFile", () => {
  it("fills in every default for a job that gives only its prompt", async () => {
    const { job, problems } = await load("prompt: Say hello\n", "hello.yaml");
    expect(problems).toEqual([]);
    expect(job).toEqual({
      name: "hello",
      file: path.join(jobsDir, "hello.yaml"),
      enabled: true,
      timezone: "Europe/Berlin",
      prompt: "Say hello",
      session: "isolated",
      overrides: {},
      timeoutMs: 600_000,
      overlap: "skip",
      catchUpMs: 3_600_000,
      retry: { attempts: 1, backoffMs: 60_000 },
      deliver: [],
      deliverWhen: "always",
      onFailure: [],
      onFailureRepeatMs: 3_600_000,
    } satisfies Job);
  });

  it("maps every field of a full job file", async () => {
    const drop = path.join(root, "drop");
    await mkdir(drop);
    const { job, problems } = await load(
      [
        "name: daily-report",
        "description: Morning summary",
        "enabled: false",
        'schedule: "0 9 * * 1-5"',
        "timezone: Asia/Shanghai",
        `watch: { paths: ["inbox/**/*.csv", "${drop}/*.txt"], events: [add, unlink], debounce: 500ms }`,
        "prompt: |",
        "  Summarise {{files}} for {{date}}.",
        "session: shared",
        "provider: deepseek",
        "model: glm-4.7-flash",
        "temperature: 0.2",
        "max_tokens: 2000",
        "max_iterations: 8",
        "breaker: { same_call: 4 }",
        "tools: [read_file, list_dir]",
        "timeout: 90s",
        "overlap: queue",
        "catch_up: 0",
        "retry: { attempts: 3, backoff: 2m }",
        "deliver: [{ email: { to: [me@example.com] } }]",
        "deliver_when: non_empty",
        "on_failure: [{ webhook: { url: https://example.com/hook, format: slack } }]",
        "",
      ].join("\n"),
    );
    expect(problems).toEqual([]);
    expect(job).toEqual({
      name: "daily-report",
      file: path.join(jobsDir, "job.yaml"),
      description: "Morning summary",
      enabled: false,
      schedule: { kind: "cron", expression: "0 9 * * 1-5" },
      watch: { paths: [path.join(workspace, "inbox/**/*.csv"), `${drop}/*.txt`], events: ["add", "unlink"], debounceMs: 500 },
      timezone: "Asia/Shanghai",
      prompt: "Summarise {{files}} for {{date}}.\n",
      session: "shared",
      overrides: {
        provider: "deepseek",
        model: "glm-4.7-flash",
        temperature: 0.2,
        maxTokens: 2000,
        maxIterations: 8,
        breaker: { sameCall: 4 },
      },
      tools: ["read_file", "list_dir"],
      timeoutMs: 90_000,
      overlap: "queue",
      catchUpMs: 0,
      retry: { attempts: 3, backoffMs: 120_000 },
      deliver: [{ kind: "email", to: ["me@example.com"], cc: [], bcc: [], attach: [] }],
      deliverWhen: "non_empty",
      onFailure: [{ kind: "webhook", url: "https://example.com/hook", format: "slack", headers: {} }],
      onFailureRepeatMs: 3_600_000,
    } satisfies Job);
  });

  it("reads every: as an interval and a 6-field cron expression as one with seconds", async () => {
    expect((await load("every: 30m\nprompt: x\n")).job?.schedule).toEqual({ kind: "every", intervalMs: 1_800_000 });
    expect((await load("every: 45\nprompt: x\n")).job?.schedule).toEqual({ kind: "every", intervalMs: 45_000 });
    expect((await load('schedule: "*/5 * * * * *"\nprompt: x\n')).job?.schedule).toEqual({ kind: "cron", expression: "*/5 * * * * *" });
  });

  it("reads at: with an offset as given and without one in the job's timezone", async () => {
    const withOffset = await load("at: 2026-12-01T09:00:00+08:00\nprompt: x\n");
    expect(withOffset.job?.schedule).toEqual({ kind: "at", date: new Date("2026-12-01T01:00:00Z") });
    const inJobZone = await load("at: 2026-12-01T09:00\ntimezone: Asia/Shanghai\nprompt: x\n");
    expect(inJobZone.job?.schedule).toEqual({ kind: "at", date: new Date("2026-12-01T01:00:00Z") });
    // countd.yaml's zone (Europe/Berlin here), on summer time in July.
    const inDefaultZone = await load("at: 2026-07-01T09:00:00\nprompt: x\n");
    expect(inDefaultZone.job?.schedule).toEqual({ kind: "at", date: new Date("2026-07-01T07:00:00Z") });
  });

  it("allows a job without a trigger: it runs only when asked (countd run)", async () => {
    const { job, problems } = await load("prompt: x\n");
    expect(problems).toEqual([]);
    expect(job?.schedule).toBeUndefined();
    expect(job?.watch).toBeUndefined();
  });

  it("takes any tool name when no list of known tools is given", async () => {
    const file = await writeJob("tools.yaml", "tools: [anything]\nprompt: x\n");
    const { job, problems } = await loadJobFile(file, { workspace, defaultTimezone: "UTC", jobEnv: [] });
    expect(problems).toEqual([]);
    expect(job?.tools).toEqual(["anything"]);
  });

  it("checks the folder a watch glob starts from: the workspace itself for a bare glob, and a file is not a folder", async () => {
    await writeFile(path.join(workspace, "notes"), "a file");
    const { job } = await load('watch: { paths: ["*.md"] }\nprompt: x\n');
    expect(job?.watch?.paths).toEqual([path.join(workspace, "*.md")]);
    expect(await problems('watch: { paths: ["notes/*.md"] }\nprompt: x\n')).toEqual([
      `job.yaml:1:18: watch.paths[0]: ${path.join(workspace, "notes")} is not a folder`,
    ]);
  });

  it("keeps a workspace whose name looks like a glob literal in the watch pattern", async () => {
    const odd = path.join(root, "[ws]");
    await mkdir(path.join(odd, "inbox"), { recursive: true });
    await writeFile(path.join(odd, "inbox", "a.csv"), "1");
    const file = await writeJob("odd.yaml", 'watch: { paths: ["inbox/*.csv"] }\nprompt: x\n');
    const { job, problems } = await loadJobFile(file, { ...ctx, workspace: odd });
    expect(problems).toEqual([]);
    expect(await glob(job!.watch!.paths, { absolute: true })).toEqual([path.join(odd, "inbox", "a.csv")]);
  });
});

describe("job file problems", () => {
  it.each([
    ["an unknown key, at the key", "prompt: x\nschedul: '0 9 * * *'\n", ['job.yaml:2:1: schedul: unknown key (did you mean "schedule"?)']],
    [
      "a bad cron expression, with croner's reason",
      "schedule: '61 * * * *'\nprompt: x\n",
      ['job.yaml:1:11: schedule: invalid cron expression "61 * * * *": Invalid value for minute: 61'],
    ],
    [
      "a cron expression with too few fields",
      "schedule: '* * *'\nprompt: x\n",
      [
        'job.yaml:1:11: schedule: invalid cron expression "* * *": it has 3 fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)',
      ],
    ],
    [
      "a 7-field cron expression",
      "prompt: x\nschedule: '0 0 9 * * * 2027'\n",
      [
        'job.yaml:2:11: schedule: invalid cron expression "0 0 9 * * * 2027": it has 7 fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)',
      ],
    ],
    [
      "a cron expression that never fires",
      "schedule: 0 0 30 2 *\nprompt: x\n",
      ['job.yaml:1:11: schedule: cron expression "0 0 30 2 *" never fires (no date matches it)'],
    ],
    [
      "an unknown timezone",
      "timezone: Mars/Olympus\nprompt: x\n",
      ['job.yaml:1:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got "Mars/Olympus"'],
    ],
    [
      "a bad duration",
      "prompt: x\ntimeout: 10 parsecs\n",
      ['job.yaml:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "10 parsecs"'],
    ],
    [
      "a zero timeout",
      "prompt: x\ntimeout: 0\n",
      ['job.yaml:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got 0'],
    ],
    ["an interval under a second", "every: 500ms\nprompt: x\n", ["job.yaml:1:8: every: expected an interval of at least 1s"]],
    [
      "a missing prompt",
      "name: quiet\nschedule: '0 9 * * *'\n",
      ["job.yaml:1:1: prompt: required: the message the agent is given on each run"],
    ],
    ["an empty prompt", "prompt: ''\n", ['job.yaml:1:9: prompt: expected a non-empty string, got ""']],
    [
      "an at: that is not a date and time",
      "at: tomorrow\nprompt: x\n",
      [
        `job.yaml:1:5: at: expected a date and time like "2026-12-01T09:00:00+08:00" (without an offset: in the job's timezone), got "tomorrow"`,
      ],
    ],
    [
      "an at: on a day that does not exist",
      "at: 2026-02-31T09:00:00\nprompt: x\n",
      ['job.yaml:1:5: at: no such date and time: "2026-02-31T09:00:00"'],
    ],
    ["an at: at hour 24", "at: 2026-02-01T24:00:00Z\nprompt: x\n", ['job.yaml:1:5: at: no such date and time: "2026-02-01T24:00:00Z"']],
    [
      "two triggers at once, at the second key",
      "schedule: '0 9 * * *'\nprompt: x\nevery: 1h\n",
      ["job.yaml:3:1: every: schedule is already given; use one of schedule, every and at"],
    ],
    [
      "three triggers at once",
      "at: 2027-01-01T00:00:00Z\nevery: 1h\nschedule: '0 9 * * *'\nprompt: x\n",
      [
        "job.yaml:2:1: every: at is already given; use one of schedule, every and at",
        "job.yaml:3:1: schedule: at is already given; use one of schedule, every and at",
      ],
    ],
    [
      "an unknown tool",
      "prompt: x\ntools: [read_file, rm_rf]\n",
      ['job.yaml:2:20: tools[1]: unknown tool "rm_rf" (known: read_file, list_dir, write_file)'],
    ],
    [
      "a bad overlap value",
      "prompt: x\noverlap: sometimes\n",
      ['job.yaml:2:10: overlap: expected one of skip, queue, replace, allow, got "sometimes"'],
    ],
    ["a bad session value", "prompt: x\nsession: global\n", ['job.yaml:2:10: session: expected one of isolated, shared, got "global"']],
    [
      "a bad watch event",
      "watch:\n  paths: [inbox]\n  events: [add, delete]\nprompt: x\n",
      ['job.yaml:3:17: watch.events[1]: expected one of add, change, unlink, got "delete"'],
    ],
    [
      "an empty watch path list",
      "watch: { paths: [] }\nprompt: x\n",
      ["job.yaml:1:17: watch.paths: expected a non-empty list of paths or globs, got a list"],
    ],
    [
      "a watch glob whose fixed folder does not exist",
      "watch:\n  paths:\n    - inbox/**/*.csv\n    - outbox/**/*.csv\nprompt: x\n",
      ["job.yaml:4:7: watch.paths[1]: the folder <ws>/outbox does not exist"],
    ],
    [
      "a plain watch path whose folder does not exist",
      "watch: { paths: [reports/latest.csv] }\nprompt: x\n",
      ["job.yaml:1:18: watch.paths[0]: the folder <ws>/reports does not exist"],
    ],
    [
      "a bad name",
      "name: Daily Report\nprompt: x\n",
      [
        'job.yaml:1:7: name: expected a job name of at most 64 lowercase letters, digits, ".", "_" and "-" (starting with a letter or digit), got "Daily Report"',
      ],
    ],
    [
      "a name too long for the file names made from it",
      `name: ${"a".repeat(65)}\nprompt: x\n`,
      [
        `job.yaml:1:7: name: expected a job name of at most 64 lowercase letters, digits, ".", "_" and "-" (starting with a letter or digit), got "${"a".repeat(65)}"`,
      ],
    ],
    ["a temperature out of range", "prompt: x\ntemperature: 3\n", ["job.yaml:2:14: temperature: expected a number from 0 to 2, got 3"]],
    [
      "a provider that is not a preset",
      "prompt: x\nprovider: skynet\n",
      ['job.yaml:2:11: provider: expected one of openai, deepseek, zhipu, qwen, moonshot, ollama, vllm, custom, anthropic, got "skynet"'],
    ],
    [
      "retry attempts of zero",
      "prompt: x\nretry: { attempts: 0 }\n",
      ["job.yaml:2:20: retry.attempts: expected a positive integer, got 0"],
    ],
    [
      "a breaker limit of zero",
      "prompt: x\nbreaker: { idle_iterations: 0 }\n",
      ["job.yaml:2:29: breaker.idle_iterations: expected a positive integer, got 0"],
    ],
    [
      "a breaker that is neither a switch nor limits",
      "prompt: x\nbreaker: off\n",
      ['job.yaml:2:10: breaker: expected true, false or a mapping with same_call:, errors_in_a_row:, idle_iterations:, got "off"'],
    ],
    [
      "deliver that is not a list",
      "prompt: x\ndeliver: me@example.com\n",
      ['job.yaml:2:10: deliver: expected a list of delivery targets, got "me@example.com"'],
    ],
  ])("%s", async (_what, text, expected) => {
    expect(await problems(text)).toEqual(expected.map((line) => line.replace("<ws>", workspace)));
  });

  it("points at an unknown placeholder inside a block prompt", async () => {
    const text = "prompt: |\n  Report for {{date}}.\n  Owner: {{ owner }} and {{job.name}}\n";
    expect(await problems(text)).toEqual([
      "job.yaml:3:10: prompt: unknown placeholder {{ owner }} (known: {{date}}, {{time}}, {{datetime}}, {{job.name}}, {{job.description}}, {{run.id}}, {{files}}, {{payload}})",
    ]);
  });

  it("refuses a file name that cannot be a job name when name: is not given", async () => {
    expect(await problems("prompt: x\n", "Daily Report.yaml")).toEqual([
      'Daily Report.yaml:1:1: the file name gives the job name "Daily Report", which is not at most 64 lowercase letters, digits, ".", "_" and "-": rename the file or set name:',
    ]);
    expect((await load("name: daily-report\nprompt: x\n", "Daily Report.yaml")).job?.name).toBe("daily-report");
  });

  it("reports a YAML syntax error with its position and nothing else", async () => {
    expect(await problems("prompt: x\nschedule: [0 9 * * *\ntimeout: 1m\n")).toEqual([
      "job.yaml:3:1: Flow sequence in block collection must be sufficiently indented and end with a ]",
    ]);
    expect(await problems("prompt: a\ntimeout: 1m\nprompt: b\n")).toEqual(["job.yaml:3:1: Map keys must be unique"]);
  });

  it("refuses a file that is not a mapping, and an empty one", async () => {
    expect(await problems("- prompt: x\n")).toEqual(["job.yaml:1:1: expected a job: a mapping with prompt:, schedule: …, got a list"]);
    expect(await problems("")).toEqual(["job.yaml:1:1: expected a job: a mapping with prompt:, schedule: …, got nothing"]);
  });

  it("reports every problem of a file at once, in file order, also those the shape check would hide", async () => {
    expect(
      await problems(
        [
          "schedule: '61 * * * *'",
          "every: 10m",
          "timezone: Mars/Base",
          "watch: { paths: [nowhere/*.csv] }",
          "tools: [read_file, nope]",
          "prompt: Hi {{nobody}}",
          "bogus: 1",
          "",
        ].join("\n"),
      ),
    ).toEqual([
      'job.yaml:1:11: schedule: invalid cron expression "61 * * * *": Invalid value for minute: 61',
      "job.yaml:2:1: every: schedule is already given; use one of schedule, every and at",
      'job.yaml:3:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got "Mars/Base"',
      `job.yaml:4:18: watch.paths[0]: the folder ${workspace}/nowhere does not exist`,
      'job.yaml:5:20: tools[1]: unknown tool "nope" (known: read_file, list_dir, write_file)',
      "job.yaml:6:12: prompt: unknown placeholder {{nobody}} (known: {{date}}, {{time}}, {{datetime}}, {{job.name}}, {{job.description}}, {{run.id}}, {{files}}, {{payload}})",
      "job.yaml:7:1: bogus: unknown key",
    ]);
  });

  it("reports a file that does not exist", async () => {
    const missing = path.join(jobsDir, "gone.yaml");
    expect(await loadJobFile(missing, ctx)).toEqual({ problems: [`${missing}: no such file`] });
  });
});

describe("delivery targets", () => {
  const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const TARGETS = [
    "prompt: Report",
    "deliver:",
    "  - webhook:",
    "      url: https://hooks.example.com/countd",
    "      secret: ${COUNTD_WEBHOOK_SECRET}",
    "      headers: { Authorization: 'Bearer ${API_TOKEN:-none}' }",
    "on_failure:",
    "  - webhook: { url: '${SLACK_HOOK_URL}', format: slack }",
    "  - email: { to: ['${OPS_EMAIL}'] }",
    "",
  ].join("\n");

  it("keeps ${VAR} references unresolved when the variables are set, so no secret is copied into the job", async () => {
    const env = { COUNTD_WEBHOOK_SECRET: SECRET, SLACK_HOOK_URL: "https://hooks.slack.com/services/T0/B0/x", OPS_EMAIL: "ops@example.com" };
    const file = await writeJob("report.yaml", TARGETS);
    const { job, problems } = await loadJobFile(file, { ...ctx, env });
    expect(problems).toEqual([]);
    expect(job?.deliver).toEqual([
      {
        kind: "webhook",
        url: "https://hooks.example.com/countd",
        secret: "${COUNTD_WEBHOOK_SECRET}",
        format: "json",
        headers: { Authorization: "Bearer ${API_TOKEN:-none}" },
      },
    ]);
    expect(job?.onFailure).toEqual([
      { kind: "webhook", url: "${SLACK_HOOK_URL}", format: "slack", headers: {} },
      { kind: "email", to: ["${OPS_EMAIL}"], cc: [], bcc: [], attach: [] },
    ]);
  });

  it("reports each unset variable at its reference", async () => {
    const file = await writeJob("report.yaml", TARGETS);
    const { job, problems } = await loadJobFile(file, { ...ctx, env: { OPS_EMAIL: "ops@example.com" } });
    expect(job).toBeUndefined();
    expect(problems.map((line) => line.replace(`${jobsDir}${path.sep}`, ""))).toEqual([
      "report.yaml:5:15: deliver[0].webhook.secret: environment variable COUNTD_WEBHOOK_SECRET is not set",
      "report.yaml:8:22: on_failure[0].webhook.url: environment variable SLACK_HOOK_URL is not set",
    ]);
  });

  it("takes the environment from process.env by default", async () => {
    const name = "COUNTD_TEST_UNSET_HOOK_URL";
    expect(process.env[name]).toBeUndefined();
    const file = await writeJob("report.yaml", `prompt: x\ndeliver: [{ webhook: { url: "\${${name}}" } }]\n`);
    expect((await loadJobFile(file, { workspace, defaultTimezone: "UTC", jobEnv: [name] })).problems).toEqual([
      `${file}:2:30: deliver[0].webhook.url: environment variable ${name} is not set`,
    ]);
  });

  it("checks a value filled in from a set variable without showing it", async () => {
    const leaked = "plain-text-secret";
    const lines = await problemsWith(TARGETS, { COUNTD_WEBHOOK_SECRET: leaked, SLACK_HOOK_URL: "hooks.slack.com/x", OPS_EMAIL: "ops" });
    expect(lines).toEqual([
      'job.yaml:5:15: deliver[0].webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (filled in from COUNTD_WEBHOOK_SECRET; the value is not shown here)',
      'job.yaml:8:21: on_failure[0].webhook.url: expected an http(s) URL like "https://hooks.example.com/countd" (filled in from SLACK_HOOK_URL; the value is not shown here)',
      'job.yaml:9:19: on_failure[1].email.to[0]: expected an email address like "ops@example.com" (filled in from OPS_EMAIL; the value is not shown here)',
    ]);
    expect(lines.join("\n")).not.toContain(leaked);
  });

  it.each([
    [
      "a bad address",
      "deliver:\n  - email: { to: [ops@] }\n",
      ['job.yaml:3:19: deliver[0].email.to[0]: expected an email address like "ops@example.com", got "ops@"'],
    ],
    [
      "a URL that is not http(s)",
      "on_failure:\n  - webhook: { url: 'ftp://files.example.com/drop' }\n",
      [
        'job.yaml:3:21: on_failure[0].webhook.url: expected an http(s) URL like "https://api.example.com/v1", got "ftp://files.example.com/drop"',
      ],
    ],
    [
      "a secret of the wrong form",
      "deliver:\n  - webhook:\n      url: https://a.example.com\n      secret: hunter2\n",
      [
        'job.yaml:5:15: deliver[0].webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (the value is not shown here)',
      ],
    ],
    [
      "an unknown format",
      "deliver:\n  - webhook: { url: https://a.example.com, format: teams }\n",
      ['job.yaml:3:52: deliver[0].webhook.format: expected one of json, output, slack, discord, feishu, dingtalk, wecom, got "teams"'],
    ],
    [
      "an unknown target",
      "deliver:\n  - sms: { to: '+100' }\n",
      ["job.yaml:3:5: deliver[0].sms: unknown key", 'job.yaml:3:5: deliver[0]: expected a delivery target: "email:" or "webhook:"'],
    ],
    [
      "a bad deliver_when",
      "deliver_when: sometimes\n",
      ['job.yaml:2:15: deliver_when: expected one of always, non_empty, changed, got "sometimes"'],
    ],
    [
      "a changed_on that is no JSONPath",
      "deliver_when: changed\nchanged_on: items[*].id\n",
      ['job.yaml:3:13: changed_on: a JSONPath starts with $, got "items[*].id"'],
    ],
    [
      "a changed_on without deliver_when: changed",
      "deliver_when: non_empty\nchanged_on: $.items[*].id\n",
      ["job.yaml:3:13: changed_on: changed_on is used only with deliver_when: changed, got deliver_when: non_empty"],
    ],
  ])("reports %s at its position", async (_what, text, expected) => {
    expect(await problems(`prompt: x\n${text}`)).toEqual(expected);
  });

  it("reads deliver_when: changed and its changed_on", async () => {
    const { job, problems } = await loadJobFile(
      await writeJob("job.yaml", "prompt: x\ndeliver_when: changed\nchanged_on: $.items[*].id\n"),
      ctx,
    );
    expect(problems).toEqual([]);
    expect(job).toMatchObject({ deliverWhen: "changed", changedOn: "$.items[*].id" });
  });

  it("does not interpolate the rest of the job file", async () => {
    const { job, problems } = await loadJobFile(await writeJob("job.yaml", "prompt: Print ${HOME} for {{job.name}}\n"), {
      ...ctx,
      env: { HOME: "/root" },
    });
    expect(problems).toEqual([]);
    expect(job?.prompt).toBe("Print ${HOME} for {{job.name}}");
  });

  async function problemsWith(text: string, env: NodeJS.ProcessEnv): Promise<string[]> {
    const { job, problems } = await loadJobFile(await writeJob("job.yaml", text), { ...ctx, env });
    expect(job).toBeUndefined();
    return problems.map((line) => line.replace(`${jobsDir}${path.sep}`, ""));
  }
});

describe("did you mean", () => {
  it.each([
    ["a missing letter", "promt: x\n", 'promt: unknown key (did you mean "prompt"?)'],
    ["swapped letters", "prompt: x\ntiemout: 5m\n", 'tiemout: unknown key (did you mean "timeout"?)'],
    ["another case and a dash", "prompt: x\nDeliver-When: always\n", 'Deliver-When: unknown key (did you mean "deliver_when"?)'],
    [
      "a key of delivery on change",
      "prompt: x\ndeliver_when: changed\nchanged_in: $.ids\n",
      'changed_in: unknown key (did you mean "changed_on"?)',
    ],
    ["a nested key", "prompt: x\nretry:\n  attempt: 3\n", 'retry.attempt: unknown key (did you mean "attempts"?)'],
    [
      "a delivery target's key",
      "prompt: x\ndeliver:\n  - webhook: { ulr: 'https://a.example.com' }\n",
      'deliver[0].webhook.ulr: unknown key (did you mean "url"?)',
    ],
  ])("suggests the known key for %s", async (_what, text, expected) => {
    expect((await problems(text)).some((line) => line.endsWith(expected))).toBe(true);
  });

  it("suggests nothing when no key is close", async () => {
    expect(await problems("prompt: x\nbogus: 1\nzz: 2\n")).toEqual(["job.yaml:2:1: bogus: unknown key", "job.yaml:3:1: zz: unknown key"]);
  });
});

describe("hostile job files", () => {
  it("rejects a billion-laughs file instead of expanding it", async () => {
    const levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"];
    for (let i = 1; i < 10; i++) {
      const name = String.fromCharCode(97 + i);
      const previous = String.fromCharCode(96 + i);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(", ")}]`);
    }
    levels.push("prompt: x");
    expect(await problems(levels.join("\n"))).toEqual([
      "job.yaml:1:1: cannot be read: Excessive alias count indicates a resource exhaustion attack",
    ]);
  });

  it("refuses a file over the size limit without parsing it, pointing at the file's start", async () => {
    const text = `prompt: "${"x".repeat(MAX_JOB_FILE_BYTES)}"\n`;
    expect(await problems(text)).toEqual([
      `job.yaml:1:1: ${Buffer.byteLength(text)} bytes; a job file may hold at most ${MAX_JOB_FILE_BYTES} bytes (256 KiB)`,
    ]);
  });

  it("loads the other jobs past a FIFO and a link to an endless device named like job files, without waiting on either", async () => {
    await writeJob("good.yaml", "prompt: x\n");
    execFileSync("mkfifo", [path.join(jobsDir, "pipe.yaml")]);
    await symlink("/dev/zero", path.join(jobsDir, "zero.yaml"));
    const { jobs, problems } = await loadJobsDir(jobsDir, ctx);
    expect(jobs.map((job) => job.name)).toEqual(["good"]);
    expect(problems).toEqual([
      `${displayPath(path.join(jobsDir, "pipe.yaml"))}: cannot read: ESPIPE: invalid seek, read`,
      `${displayPath(path.join(jobsDir, "zero.yaml"))}:1:1: more than ${MAX_JOB_FILE_BYTES} bytes; a job file may hold at most ${MAX_JOB_FILE_BYTES} bytes (256 KiB)`,
    ]);
  });

  it("reports an empty duration at its position instead of failing the whole load", async () => {
    expect(await problems('prompt: x\ntimeout: ""\n')).toEqual([
      'job.yaml:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got ""',
    ]);
  });

  it("refuses durations too large to compute a date from", async () => {
    expect(await problems("prompt: x\nevery: 1e300\ntimeout: 1e308\ncatch_up: 999999999999y\n")).toEqual([
      "job.yaml:2:8: every: expected a duration of at most 100 years, got 1e+300",
      "job.yaml:3:10: timeout: expected a duration of at most 100 years, got 1e+308",
      'job.yaml:4:11: catch_up: expected a duration of at most 100 years, got "999999999999y"',
    ]);
  });

  it("quotes only the start of a huge value in its problem", async () => {
    const huge = "x".repeat(60_000);
    const lines = await problems(`prompt: x\nschedule: "${huge}"\ntimezone: "${huge}"\novername: "${huge}"\noverlap: "${huge}"\n`);
    const quoted = `"${"x".repeat(80)}"… (60000 characters)`;
    expect(lines).toEqual([
      `job.yaml:2:11: schedule: expected a cron expression of at most 1000 characters, got ${quoted}`,
      `job.yaml:3:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got ${quoted}`,
      "job.yaml:4:1: overname: unknown key",
      `job.yaml:5:10: overlap: expected one of skip, queue, replace, allow, got ${quoted}`,
    ]);
  });

  it("lists the first problems of a file with thousands, then counts the rest at the next one's position", async () => {
    const lines = await problems(`prompt: x\ntools: [${Array(5000).fill("1").join(", ")}]\n`);
    expect(lines).toHaveLength(MAX_PROBLEMS_PER_FILE + 1);
    expect(lines[0]).toBe("job.yaml:2:9: tools[0]: expected a string, got 1");
    expect(lines.at(-1)).toBe(
      `job.yaml:2:${9 + 3 * MAX_PROBLEMS_PER_FILE}: ${5000 - MAX_PROBLEMS_PER_FILE} more problems in this file not shown`,
    );
  });

  it("refuses deep nesting at the level past the limit, before parsing it", async () => {
    const depth = 100_000;
    expect(await problems(`prompt: x\ndeliver: ${"[".repeat(depth)}${"]".repeat(depth)}\n`)).toEqual([
      `job.yaml:2:${10 + MAX_JOB_NESTING}: nested more than ${MAX_JOB_NESTING} levels deep`,
    ]);
    expect(await problems(`prompt: x\ntools:\n${"- ".repeat(depth)}read_file\n`)).toEqual([
      `job.yaml:3:${1 + 2 * MAX_JOB_NESTING}: nested more than ${MAX_JOB_NESTING} levels deep`,
    ]);
  });

  it("reads nesting up to the limit, and does not count brackets inside strings", async () => {
    const nested = `${"[".repeat(MAX_JOB_NESTING)}${"]".repeat(MAX_JOB_NESTING)}`;
    expect(await problems(`prompt: "${nested}${nested}"\ndeliver: ${nested}\n`)).toEqual([
      'job.yaml:2:11: deliver[0]: expected a delivery target: "email:" or "webhook:", got a list',
    ]);
  });
});

describe("loadJobsDir", () => {
  it("loads every *.yaml and *.yml file in name order and skips an invalid one with its problems", async () => {
    await writeJob("b.yml", "prompt: b\n");
    await writeJob("a.yaml", "prompt: a\n");
    await writeJob("c.yaml", "prompt: c\ntimeout: soon\n");
    await writeJob("notes.txt", "not a job");
    await writeJob(".#a.yaml", "editor lock file");
    await mkdir(path.join(jobsDir, "old.yaml"));
    const { jobs, problems } = await loadJobsDir(jobsDir, ctx);
    expect(jobs.map((job) => job.name)).toEqual(["a", "b"]);
    expect(problems).toEqual([
      `${path.join(jobsDir, "c.yaml")}:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"`,
    ]);
  });

  it("names both files when two jobs share a name, at the second one's name:, and keeps the first", async () => {
    await writeJob("a.yaml", "name: report\nprompt: first\n");
    await writeJob("b.yaml", "prompt: second\nname: report\n");
    await writeJob("report.yaml", "prompt: third\n");
    const { jobs, problems } = await loadJobsDir(jobsDir, ctx);
    expect(jobs.map((job) => job.prompt)).toEqual(["first"]);
    expect(problems).toEqual([
      `${path.join(jobsDir, "b.yaml")}:2:7: name: "report" is already the name of the job in ${path.join(jobsDir, "a.yaml")}`,
      `${path.join(jobsDir, "report.yaml")}:1:1: name: "report" is already the name of the job in ${path.join(jobsDir, "a.yaml")}`,
    ]);
  });

  it("reports a jobs folder that does not exist", async () => {
    const missing = path.join(root, "nojobs");
    expect(await loadJobsDir(missing, ctx)).toEqual({ jobs: [], problems: [`${missing}: no such folder`] });
  });
});

describe("validateJobs", () => {
  it("gives one summary line when every job is valid", async () => {
    await writeJob("a.yaml", "prompt: a\n");
    await writeJob("b.yaml", "prompt: b\nevery: 1h\n");
    expect(await validateJobs(jobsDir, ctx)).toEqual({ lines: [], ok: true, summary: `2 jobs valid in ${jobsDir}/` });
  });

  it("lists the problems and counts them", async () => {
    await writeJob("a.yaml", "prompt: a\n");
    await writeJob("b.yaml", "prompt: b\nevery: often\n");
    const result = await validateJobs(jobsDir, ctx);
    expect(result.ok).toBe(false);
    expect(result.lines).toEqual([
      `${path.join(jobsDir, "b.yaml")}:2:8: every: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "often"`,
    ]);
    expect(result.summary).toBe(`1 problem in ${jobsDir}/ (1 job valid)`);
  });

  it("prints a warning for an at: in the past, which does not fail", async () => {
    await writeJob("once.yaml", "at: 2020-03-01T09:00:00Z\nprompt: once\n");
    await writeJob("later.yaml", "at: 2999-03-01T09:00:00Z\nprompt: later\n");
    const result = await validateJobs(jobsDir, ctx);
    expect(result).toEqual({
      ok: true,
      lines: [
        `${path.join(jobsDir, "once.yaml")}:1:5: warning: at: 2020-03-01T09:00:00Z (2020-03-01 10:00:00 +01:00) is in the past: the job fires only as a catch-up run, if countd starts within catch_up of it`,
      ],
      summary: `2 jobs valid in ${jobsDir}/ (1 warning)`,
    });
  });

  it("quotes a past at: as it is written, then as the job's clock reads it", async () => {
    await writeJob("ny.yaml", 'timezone: America/New_York\nat: "2020-07-01T09:00"\nprompt: once\n');
    const result = await validateJobs(jobsDir, ctx);
    expect(result.lines).toEqual([
      expect.stringContaining("ny.yaml:2:5: warning: at: 2020-07-01T09:00 (2020-07-01 09:00:00 -04:00) is in the past"),
    ]);
  });

  it("counts warnings beside problems", async () => {
    await writeJob("once.yaml", "at: 2020-03-01T09:00:00\nprompt: once\n");
    await writeJob("bad.yaml", "prompt: x\nevery: often\n");
    const result = await validateJobs(jobsDir, ctx);
    expect(result.ok).toBe(false);
    expect(result.lines).toHaveLength(2);
    expect(result.lines[1]).toMatch(/once\.yaml:1:5: warning: at: 2020-03-01T09:00:00 \(2020-03-01 09:00:00 \+01:00\) is in the past/);
    expect(result.summary).toBe(`1 problem in ${jobsDir}/ (1 job valid, 1 warning)`);
  });

  it("shows paths under the working directory relative to it", () => {
    expect(displayPath(path.join(process.cwd(), "jobs", "a.yaml"))).toBe(path.join("jobs", "a.yaml"));
    expect(displayPath("/elsewhere/jobs/a.yaml")).toBe("/elsewhere/jobs/a.yaml");
  });
});
