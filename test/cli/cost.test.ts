import { mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import type { Usage } from "../../src/providers/types.js";
import type { SpendLine } from "../../src/store/spend-ledger.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver } from "../support/webhook-receiver.js";
import { shownTime } from "../../src/time.js";

const HOUR = 3_600_000;
const usage = (inputTokens: number, cachedInputTokens: number, cacheWriteTokens: number, outputTokens: number): Usage => ({
  inputTokens,
  cachedInputTokens,
  cacheWriteTokens,
  outputTokens,
});

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-cost-"));
  await mkdir(join(dir, "jobs"));
  await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\nbudget:\n  timezone: Pacific/Kiritimati\n");
});

/** Read-only commands: no provider key is needed, and none is given. */
const countd = (args: string[], env: Record<string, string> = {}) => runCountd(args, { cwd: dir, env });

/** Spend lines as the daemon appends them, each in the file of its UTC date. */
async function writeSpend(lines: SpendLine[]): Promise<void> {
  await mkdir(join(dir, "state", "spend"), { recursive: true });
  const files = new Map<string, SpendLine[]>();
  for (const line of lines) {
    const name = `${line.at.slice(0, 10)}.jsonl`;
    files.set(name, [...(files.get(name) ?? []), line]);
  }
  for (const [name, members] of files)
    await writeFile(join(dir, "state", "spend", name), members.map((line) => `${JSON.stringify(line)}\n`).join(""));
}

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
/** The day of an instant in the budget's zone, worked out apart from countd's own clock code. */
const dayIn = (iso: string) => new Date(iso).toLocaleDateString("en-CA", { timeZone: "Pacific/Kiritimati" });

describe("countd cost", () => {
  const lines: SpendLine[] = [
    { at: ago(1 * HOUR), job: "weekly", run: "r1", model: "gpt-4o-mini", usage: usage(1000, 400, 0, 200), cost: 0.0005 },
    { at: ago(2 * HOUR), job: "weekly", run: "r1", model: "gpt-4o-mini", usage: usage(3000, 2000, 0, 100), cost: 0.0007 },
    { at: ago(3 * HOUR), job: "local", run: "r2", model: "llama3.1", usage: usage(500, 0, 0, 50), cost: null },
    { at: ago(50 * HOUR), job: "digest", run: "r3", model: "claude-haiku-4-5", usage: usage(2000, 0, 1500, 300), cost: 0.25 },
    { at: ago(51 * HOUR), job: "weekly", run: "r4", model: "llama3.1", usage: usage(100, 0, 0, 10), cost: null },
    // Older than the default week: counted only with a longer --since.
    { at: ago(10 * 24 * HOUR), job: "weekly", run: "r0", model: "gpt-4o-mini", usage: usage(9000, 0, 0, 900), cost: 1.5 },
  ];

  it("sums the last week by job, dearest first, with a total; unpriced calls are named, not counted as $0", async () => {
    await writeSpend(lines);
    const run = await countd(["cost"]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const [title, ...table] = run.stdout.trimEnd().split("\n");
    expect(title).toMatch(/^LLM calls since \d{4}-\d\d-\d\d \d\d:\d\d \+14:00, by job$/);
    expect(table.map((line) => line.split(/ {2,}/))).toEqual([
      ["JOB", "CALLS", "INPUT", "CACHED", "CACHE WRITES", "OUTPUT", "USD"],
      ["digest", "1", "2000", "0", "1500", "300", "$0.2500"],
      ["weekly", "3", "4100", "2400", "0", "310", "$0.0012 + 1 unpriced call"],
      ["local", "1", "500", "0", "0", "50", "1 unpriced call"],
      ["total", "5", "6600", "2400", "1500", "660", "$0.2512 + 2 unpriced calls"],
    ]);
  });

  it("groups by model, and by day in budget.timezone, oldest first", async () => {
    await writeSpend(lines);
    const byModel = await countd(["cost", "--by", "model"]);
    expect(
      byModel.stdout
        .split("\n")
        .slice(1, 5)
        .map((line) => line.split(/ {2,}/)[0]),
    ).toEqual(["MODEL", "claude-haiku-4-5", "gpt-4o-mini", "llama3.1"]);
    expect(byModel.stdout).toMatch(/^llama3\.1 +2 +600 +0 +0 +60 +2 unpriced calls$/m);

    const byDay = await countd(["cost", "--by", "day", "--since", "30d"]);
    expect(byDay.stdout.split("\n")[0]).toMatch(/, by day \(Pacific\/Kiritimati\)$/);
    const expected = new Map<string, number>();
    for (const line of lines) expected.set(dayIn(line.at), (expected.get(dayIn(line.at)) ?? 0) + 1);
    const rows = byDay.stdout
      .trimEnd()
      .split("\n")
      .slice(2, -1)
      .map((line) => line.split(/ {2,}/));
    expect(rows.map(([day, calls]) => [day, Number(calls)])).toEqual([...expected].sort(([a], [b]) => a.localeCompare(b)));
    expect(byDay.stdout).toMatch(/^total +6 +15600 .* \$1\.7512 \+ 2 unpriced calls$/m);
  });

  it("prints JSON with the priced USD and the unpriced calls apart, and takes --since as a duration", async () => {
    await writeSpend(lines);
    const run = await countd(["cost", "--since", "1d", "--json"]);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(report).toEqual({
      since: expect.stringMatching(/^\d{4}-.*Z$/),
      by: "job",
      timezone: "Pacific/Kiritimati",
      rows: [
        { key: "weekly", calls: 2, usage: usage(4000, 2400, 0, 300), cost: 0.0012, unpricedCalls: 0, estimatedCalls: 0 },
        { key: "local", calls: 1, usage: usage(500, 0, 0, 50), cost: 0, unpricedCalls: 1, estimatedCalls: 0 },
      ],
      total: { key: "total", calls: 3, usage: usage(4500, 2400, 0, 350), cost: 0.0012, unpricedCalls: 1, estimatedCalls: 0 },
    });
    expect(Date.now() - Date.parse(report["since"] as string)).toBeGreaterThanOrEqual(24 * HOUR);
    expect(Date.now() - Date.parse(report["since"] as string)).toBeLessThan(24 * HOUR + 60_000);
  });

  it("says when nothing was spent, and refuses a duration without a unit or an unknown grouping", async () => {
    expect(await countd(["cost"])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^No LLM calls since \d{4}-\d\d-\d\d \d\d:\d\d \+14:00\.\n$/),
    });
    for (const [args, reason] of [
      [
        ["cost", "--since", "7"],
        /option '--since <duration>' argument '7' is invalid\. expected a duration with its unit, like "7d", "24h" or "30m"\./,
      ],
      [["cost", "--since", "soon"], /argument 'soon' is invalid/],
      [["cost", "--by", "week"], /argument 'week' is invalid\. Allowed choices are job, model, day\./],
    ] as const) {
      const run = await countd([...args]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(reason);
    }
  });
});

describe("countd history", () => {
  const mock = useAimock();

  it("shows each run's tokens with cached input and cache writes, and its cost: USD, unpriced, or - before pricing", async () => {
    mock.onMessage("weekly numbers", { content: "Revenue is up 4 %." });
    await writeFile(join(dir, "jobs", "weekly.yaml"), "prompt: Report the weekly numbers.\n");
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-cost-test-key" };
    expect((await countd(["run", "weekly"], env)).code).toBe(0);

    const run = (id: string, startedAt: string, fields: Partial<RunRecord>): RunRecord => ({
      id,
      job: "weekly",
      reason: "schedule",
      scheduledAt: startedAt,
      startedAt,
      finishedAt: new Date(Date.parse(startedAt) + 4_200).toISOString(),
      status: "ok",
      iterations: 1,
      toolCalls: 0,
      usage: usage(0, 0, 0, 0),
      sessionId: `cron:weekly:${id}`,
      ...fields,
    });
    const state = await StateStore.open(join(dir, "state"));
    // Written before pricing: no cost, no cache writes.
    await state.saveRun({
      ...run("20200101T090000Z-old1", "2020-01-01T09:00:00.000Z", {}),
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0 } as Usage,
    });
    await state.saveRun(
      run("20200102T090000Z-unp1", "2020-01-02T09:00:00.000Z", { usage: usage(1200, 800, 300, 50), cost: null, model: "llama3.1" }),
    );
    await state.saveRun(
      run("20200103T090000Z-bud1", "2020-01-03T09:00:00.000Z", {
        status: "budget",
        usage: usage(5000, 0, 0, 700),
        cost: 0.5,
        error: "the job's per-run budget of $0.5000 is spent: this run has cost $0.5000",
      }),
    );
    await state.close();

    // The job names no zone, nor does countd.yaml: the machine's, with its offset.
    const shownInJobZone = (iso: string) => shownTime(iso, Intl.DateTimeFormat().resolvedOptions().timeZone);
    const shown = await countd(["history", "weekly"]);
    expect(shown).toMatchObject({ code: 0, stderr: "" });
    const rows = shown.stdout
      .trimEnd()
      .split("\n")
      .map((line) => line.split(/ {2,}/));
    expect(rows.slice(0, 4)).toEqual([
      ["STARTED", "JOB", "REASON", "STATUS", "DURATION", "TOKENS", "COST", "ERROR"],
      [shownInJobZone("2020-01-01T09:00:00.000Z"), "weekly", "schedule", "ok", "4.2s", "10 in / 5 out", "-"],
      [
        shownInJobZone("2020-01-02T09:00:00.000Z"),
        "weekly",
        "schedule",
        "ok",
        "4.2s",
        "1200 in (800 cached, 300 cache writes) / 50 out",
        "unpriced",
      ],
      [
        shownInJobZone("2020-01-03T09:00:00.000Z"),
        "weekly",
        "schedule",
        "budget",
        "4.2s",
        "5000 in / 700 out",
        "$0.5000",
        "the job's per-run budget of $0.5000 is spent: this run has cost $0.5000",
      ],
    ]);
    // The run just made against the loopback LLM: gpt-4o-mini, priced from the bundled table.
    expect(rows[4]).toEqual([
      expect.any(String),
      "weekly",
      "manual",
      "ok",
      expect.any(String),
      expect.stringMatching(/^\d+ in .*\/ \d+ out$/),
      expect.stringMatching(/^(\$\d+\.\d{4}|<\$0\.0001)$/),
    ]);

    const records = JSON.parse((await countd(["history", "weekly", "--json"])).stdout) as RunRecord[];
    expect(records.map((record) => record.cost)).toEqual([undefined, null, 0.5, expect.any(Number)]);
    expect(records[3]!.cost).toBeGreaterThan(0);
  });

  it("delivers the run's cost: in the webhook payload's run, and in the mail's footer: usage", async () => {
    mock.onMessage("daily numbers", { content: "Sales are flat." });
    const receiver = await startWebhookReceiver();
    try {
      await writeFile(
        join(dir, "jobs", "daily.yaml"),
        `prompt: Report the daily numbers.\ndeliver:\n  - webhook: { url: "${receiver.url}" }\n  - email: { to: [boss@example.com], footer: usage }\n`,
      );
      const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-cost-test-key" };
      expect((await countd(["run", "daily"], env)).code).toBe(0);
      const [record] = JSON.parse((await countd(["history", "daily", "--json"])).stdout) as RunRecord[];
      expect(record!.cost).toBeGreaterThan(0);
      await receiver.waitFor(1);
      const payload = JSON.parse(receiver.requests[0]!.body) as { run: { cost: unknown; usage: unknown } };
      expect(payload.run).toMatchObject({ cost: record!.cost, usage: record!.usage });
      // No smtp: settings, so the mail is the .eml file countd wrote.
      const [eml] = await readdir(join(dir, "state", "mail"));
      const mail = (await readFile(join(dir, "state", "mail", eml!), "utf8")).replace(/=\r?\n/g, "").replace(/=C2=B7/g, "·");
      expect(mail).toMatch(/\n---\n\nTokens: \d+ in .*\/ \d+ out · Cost: (\$\d+\.\d{4}|<\$0\.0001) · Duration: \S+\n/);
    } finally {
      await receiver.close();
    }
  });
});
