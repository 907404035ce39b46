import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Job } from "../../src/jobs/types.js";
import { sessionFileName } from "../../src/sessions/file-names.js";
import { useAimock } from "../support/aimock.js";
import { openStack, type CostStack } from "../support/cost-stack.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Budgets as a user meets them: countd as the daemon wires it, against aimock on loopback, whose
 * request journal shows which LLM calls were made. The model is priced by countd.yaml at $1 per
 * million tokens in and out, and every call reports 6,000 input and 500 output tokens: $0.0065.
 */

const MODEL = "budget-model";
const CALL = { prompt_tokens: 6_000, completion_tokens: 500, total_tokens: 6_500 };

describe("budgets", () => {
  const mock = useAimock();
  let dir: string;
  let stacks: CostStack[];
  let clock: Date;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
  });
  afterAll(() => receiver.close());
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-budget-"));
    stacks = [];
    clock = new Date("2026-11-30T09:00:00Z");
    receiver.requests.length = 0;
  });
  afterEach(async () => {
    for (const stack of stacks) await stack.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** countd on this directory (again, for a restart), with `budget:` of countd.yaml as given. */
  async function countd(budget = "", model = MODEL, jobs = new Map<string, Job>()): Promise<CostStack> {
    const yaml = [
      `provider:\n  preset: openai\n  model: ${model}`,
      "tools:\n  exec:\n    sandbox: none",
      `prices:\n  ${MODEL}: { input: 1, output: 1 }`,
      budget,
    ].join("\n");
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-test-budget-0123456789" };
    const stack = await openStack({ dir, yaml, env, now: () => clock, jobs });
    stacks.push(stack);
    return stack;
  }

  const at = (iso: string) => {
    clock = new Date(iso);
  };

  /** One call answering `prompt`. */
  const answers = (prompt: string, content: string) =>
    mock.addFixture({ match: { userMessage: prompt }, response: { content, usage: CALL } });

  describe("a per-run cap", () => {
    const PROMPT = "Compare alpha.txt with beta.txt";

    /** Three calls if let run: read alpha.txt, read beta.txt, answer; each with a word of progress first. */
    function compareFixtures(): void {
      mock.addFixture({
        match: { userMessage: PROMPT, hasToolResult: false },
        response: {
          content: "Reading alpha.txt first.",
          toolCalls: [{ name: "read_file", arguments: '{"path":"alpha.txt"}' }],
          usage: CALL,
        },
      });
      mock.addFixture({
        match: { userMessage: PROMPT, toolResultContains: "ALPHA-CONTENT" },
        response: {
          content: " Alpha says 3; now beta.txt.",
          toolCalls: [{ name: "read_file", arguments: '{"path":"beta.txt"}' }],
          usage: CALL,
        },
      });
      mock.addFixture({
        match: { userMessage: PROMPT, toolResultContains: "BETA-CONTENT" },
        response: { content: "Alpha 3, beta 4.", usage: CALL },
      });
    }

    it("stops a tool-using run before the call after the one that crossed it: status budget, the amounts named, the partial answer kept, on_failure told once, no retry", async () => {
      const stack = await countd();
      await writeFile(join(stack.config.paths.workspace, "alpha.txt"), "ALPHA-CONTENT: 3\n");
      await writeFile(join(stack.config.paths.workspace, "beta.txt"), "BETA-CONTENT: 4\n");
      await stack.jobFile(
        "compare",
        [
          "name: compare",
          `prompt: ${PROMPT}`,
          "tools: [read_file]",
          "budget: { per_run: 0.01 }",
          "retry: { attempts: 3, backoff: 1s }",
          "on_failure:",
          `  - webhook: { url: "${receiver.url}" }`,
        ].join("\n"),
      );
      compareFixtures();

      const record = await stack.run("compare");

      // $0.0065 after the first call is under the cap; $0.0130 after the second is past it: no third.
      expect(mock.getRequests()).toHaveLength(2);
      expect(record).toMatchObject({
        status: "budget",
        iterations: 2,
        toolCalls: 2,
        model: MODEL,
        usage: { inputTokens: 12_000, outputTokens: 1_000 },
      });
      expect(record.cost).toBeCloseTo(0.013, 12);
      expect(record.error).toBe("the job's per-run budget of $0.0100 is spent: this run has cost $0.0130");
      expect(record.resultExcerpt).toBe("Reading alpha.txt first. Alpha says 3; now beta.txt.");
      // Both tool results are in the session: the transcript shows how far the run got.
      const session = await readFile(join(stack.config.paths.state, "sessions", sessionFileName(record.sessionId)), "utf8");
      expect(session).toContain("ALPHA-CONTENT: 3");
      expect(session).toContain("BETA-CONTENT: 4");

      await receiver.waitFor(1);
      const report = JSON.parse(receiver.requests[0]!.body) as {
        type: string;
        job: string;
        run: { id: string; status: string };
        error: string;
        result: string;
      };
      expect(report).toMatchObject({ type: "run.failed", job: "compare", run: { id: record.id, status: "budget" }, error: record.error });
      expect(report.result).toBe("Reading alpha.txt first. Alpha says 3; now beta.txt.");

      // Stopped by its budget again within on_failure_repeat (1 h): not reported again.
      const second = await stack.run("compare");
      expect(second).toMatchObject({ status: "budget", error: "the job's per-run budget of $0.0100 is spent: this run has cost $0.0130" });
      expect(mock.getRequests()).toHaveLength(4);
      await stack.close();
      expect(receiver.requests).toHaveLength(1);
      expect(stack.pipeline.outbox.list()).toEqual({ pending: [], dead: [] });
      // retry.attempts 3, yet each fire is one run: a budget stop is not retried.
      expect((await stack.state.runs("compare")).map((run) => [run.reason, run.status])).toEqual([
        ["manual", "budget"],
        ["manual", "budget"],
      ]);
    });

    it("counts tokens_per_run for an unpriced model, whose USD caps cannot apply", async () => {
      const stack = await countd("", "unpriced-model");
      await writeFile(join(stack.config.paths.workspace, "alpha.txt"), "ALPHA-CONTENT: 3\n");
      await writeFile(join(stack.config.paths.workspace, "beta.txt"), "BETA-CONTENT: 4\n");
      // per_run $0.000001 would stop a priced run after its first call; tokens_per_run 10,000 after its second.
      stack.job("compare", PROMPT, { tools: ["read_file"], budget: { perRun: 0.000001, perDay: 0.000001, tokensPerRun: 10_000 } });
      compareFixtures();

      const record = await stack.run("compare");

      expect(mock.getRequests()).toHaveLength(2);
      expect(record).toMatchObject({
        status: "budget",
        cost: null,
        model: "unpriced-model",
        usage: { inputTokens: 12_000, outputTokens: 1_000 },
      });
      expect(record.error).toBe("the job's per-run budget of 10000 tokens is spent: this run has used 13000 tokens");
    });
  });

  describe("a per-day cap", () => {
    const PROMPT = "Summarise the day";
    const dailyJob = (stack: CostStack) =>
      stack.jobFile("daily", ["name: daily", `prompt: ${PROMPT}`, "tools: []", "budget: { per_day: 0.01 }"].join("\n"));
    /** One call costs more than the day's cap: $0.0130 of $0.0100. */
    const bigCall = () =>
      mock.addFixture({
        match: { userMessage: PROMPT },
        response: { content: "A quiet day.", usage: { prompt_tokens: 12_000, completion_tokens: 1_000 } },
      });

    it("stops the next run of the day before any request, and lets the first run of the next day (in budget.timezone) through", async () => {
      // Auckland is 13 hours ahead in November: its 1 December begins at 11:00 UTC on 30 November.
      const stack = await countd("budget:\n  timezone: Pacific/Auckland");
      await dailyJob(stack);
      bigCall();

      at("2026-11-30T09:00:00Z"); // 22:00 on 30 November in Auckland
      expect(await stack.run("daily")).toMatchObject({ status: "ok", cost: expect.closeTo(0.013, 12) });
      expect(mock.getRequests()).toHaveLength(1);

      at("2026-11-30T10:30:00Z"); // 23:30, the same day
      const stopped = await stack.run("daily");
      expect(mock.getRequests()).toHaveLength(1);
      expect(stopped).toMatchObject({ status: "budget", iterations: 0, cost: 0 });
      expect(stopped.error).toBe("the job's daily budget of $0.0100 is spent: its runs have cost $0.0130 on 2026-11-30 (Pacific/Auckland)");

      at("2026-11-30T11:30:00Z"); // 00:30 on 1 December in Auckland, still 30 November in UTC
      expect(await stack.run("daily")).toMatchObject({ status: "ok" });
      expect(mock.getRequests()).toHaveLength(2);
    });

    it("counts the day's spending after a restart, across the UTC date change (the ledger's file of the day before)", async () => {
      // New York is 5 hours behind in November: 23:00 and 01:00 UTC fall on one New York day, 30 November.
      const jobs = new Map<string, Job>();
      const first = await countd("budget:\n  timezone: America/New_York", MODEL, jobs);
      await dailyJob(first);
      bigCall();
      at("2026-11-30T23:00:00Z"); // 18:00 in New York
      expect(await first.run("daily")).toMatchObject({ status: "ok" });
      await first.close();

      at("2026-12-01T01:00:00Z"); // 20:00 in New York; a new UTC day
      const second = await countd("budget:\n  timezone: America/New_York", MODEL, jobs);
      const stopped = await second.run("daily");
      expect(mock.getRequests()).toHaveLength(1);
      expect(stopped).toMatchObject({
        status: "budget",
        error: "the job's daily budget of $0.0100 is spent: its runs have cost $0.0130 on 2026-11-30 (America/New_York)",
      });
    });

    it("stops a run of any job once countd.yaml's budget.per_day is spent by another", async () => {
      const stack = await countd("budget:\n  per_day: 0.01\n  timezone: UTC");
      stack.job("spender", "Spend");
      stack.job("other", "Other work");
      mock.addFixture({
        match: { userMessage: "Spend" },
        response: { content: "Spent.", usage: { prompt_tokens: 12_000, completion_tokens: 1_000 } },
      });
      answers("Other work", "Done.");

      expect(await stack.run("spender")).toMatchObject({ status: "ok" });
      const stopped = await stack.run("other");
      expect(mock.getRequests()).toHaveLength(1);
      expect(stopped).toMatchObject({
        status: "budget",
        error: "countd's daily budget (budget.per_day) of $0.0100 is spent: all runs have cost $0.0130 on 2026-11-30 (UTC)",
      });
    });
  });
});
