import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readSpend } from "../../src/store/spend-ledger.js";
import { openStack, type CostStack } from "../support/cost-stack.js";
import { runCountd } from "../support/daemon-process.js";
import { chunk, DONE, startSseServer, type SseServer } from "../support/sse-server.js";

/*
 * A gateway that ignores stream_options.include_usage: every answer is a read_file call and no
 * call ever says what it used. Left alone the run would go on to max_iterations (25 calls).
 */

const PRICED = "gateway-model";
const READ = chunk({
  role: "assistant",
  tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path":"alpha.txt"}' } }],
});

describe("a provider that reports no usage", () => {
  let dir: string;
  let server: SseServer;
  let stack: CostStack | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-nousage-"));
    server = await startSseServer([{ events: [READ, chunk({}, "tool_calls"), DONE] }]);
  });
  afterEach(async () => {
    await stack?.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function runJob(model: string) {
    const yaml = [
      `provider:\n  preset: openai\n  model: ${model}`,
      "tools:\n  exec:\n    sandbox: none",
      `prices:\n  ${PRICED}: { input: 20, output: 20 }`,
    ].join("\n");
    stack = await openStack({ dir, yaml, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "sk-test-nousage-0123456789" } });
    await writeFile(join(stack.config.paths.workspace, "alpha.txt"), "ALPHA-CONTENT: 3\n");
    await stack.jobFile(
      "loop",
      [
        "name: loop",
        "prompt: Read alpha.txt until told to stop",
        "tools: [read_file]",
        "budget: { per_run: 0.01, tokens_per_run: 500 }",
      ].join("\n"),
    );
    const record = await stack.run("loop");
    await stack.close();
    return record;
  }

  it("estimates each call from its size, prices the estimate, stops the run at the cap, and marks it estimated everywhere", async () => {
    const record = await runJob(PRICED);

    // The first request alone (system prompt, tools, the prompt) is past 500 tokens by ceil(bytes / 4).
    expect(server.requests.length).toBeLessThanOrEqual(2);
    expect(record.status).toBe("budget");
    expect(record.error).toMatch(/^the job's per-run budget of (500 tokens|\$0\.0100) is spent: this run has (used|cost) ~/);
    const tokens = record.usage.inputTokens + record.usage.outputTokens;
    expect(tokens).toBeGreaterThanOrEqual(500);
    expect(record.usage.estimatedTokens).toBe(tokens);
    // $20 per million tokens, in and out alike.
    expect(record.cost).toBeCloseTo((tokens * 20) / 1e6, 12);

    const cost = await runCountd(["cost", "--json"], { cwd: dir });
    expect(cost.code).toBe(0);
    const report = JSON.parse(cost.stdout) as { rows: Array<Record<string, unknown>> };
    expect(report.rows).toEqual([
      expect.objectContaining({
        key: "loop",
        calls: server.requests.length,
        estimatedCalls: server.requests.length,
        cost: expect.closeTo(record.cost!, 9),
        unpricedCalls: 0,
      }),
    ]);
    const table = await runCountd(["cost"], { cwd: dir });
    expect(table.stdout).toMatch(
      new RegExp(`^loop +${server.requests.length} +~\\d+ +0 +~\\d+ +~\\$0\\.\\d{4} \\(${server.requests.length} estimated\\)$`, "m"),
    );
    const history = await runCountd(["history", "loop"], { cwd: dir });
    expect(history.stdout).toMatch(/ budget +\S+ +~\d+ in \/ ~\d+ out +~\$0\.\d{4} /);
  });

  it("counts an unpriced model's estimated tokens against tokens_per_run, its cost unpriced, never $0", async () => {
    const record = await runJob("unpriced-gateway-model");

    expect(server.requests.length).toBeLessThanOrEqual(2);
    expect(record).toMatchObject({ status: "budget", cost: null });
    expect(record.error).toMatch(/^the job's per-run budget of 500 tokens is spent: this run has used ~\d+ tokens$/);
    const table = await runCountd(["cost"], { cwd: dir });
    expect(table.stdout).toMatch(
      new RegExp(
        `^loop +${server.requests.length} +~\\d+ +0 +~\\d+ +${server.requests.length} unpriced calls? \\(${server.requests.length} estimated\\)$`,
        "m",
      ),
    );
  });

  it("counts a call that broke off after streaming output as estimated, and one that failed before any output not at all", async () => {
    await server.close();
    server = await startSseServer([
      { status: 400, body: '{"error":{"message":"bad request"}}' },
      { events: [chunk({ role: "assistant", content: "The queue holds three items and" })], after: "drop" },
    ]);
    const yaml = [
      `provider:\n  preset: openai\n  model: ${PRICED}`,
      "tools:\n  exec:\n    sandbox: none",
      `prices:\n  ${PRICED}: { input: 20, output: 20 }`,
    ].join("\n");
    stack = await openStack({ dir, yaml, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "sk-test-nousage-0123456789" } });
    stack.job("broken", "Count the queue");

    expect(await stack.run("broken")).toMatchObject({ status: "error" });
    expect(await stack.run("broken")).toMatchObject({ status: "error" });
    await stack.close();

    const lines = await readSpend(stack.config.paths.state, new Date(0));
    // The 400 is not a call the provider answered; the broken stream streamed eight words.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ job: "broken", usage: { outputTokens: 8, estimatedTokens: lines[0]!.usage.inputTokens + 8 } });
    expect(lines[0]!.cost).toBeGreaterThan(0);
  });
});
