import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { openStack, type CostStack } from "../support/cost-stack.js";
import { startHeldLlm, type HeldLlm, type HeldRequest } from "../support/held-llm.js";

/*
 * Four runs started at once (runner.concurrency 4) against a daily cap, each one LLM call that
 * the server holds open until every run has either sent its call or ended. Output is priced at
 * $10 per million tokens and input at nothing, and each call answers with max_tokens (1,000) of
 * output: every call costs exactly what it reserves, $0.0100.
 */

const PROMPT = "Summarise the queue";
const CALL = { prompt_tokens: 2_000, completion_tokens: 1_000 };
const CAP = 0.015;
const ONE_CALL = 0.01;

describe("calls in flight against the daily caps", () => {
  let dir: string;
  let llm: HeldLlm;
  let stack: CostStack | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-inflight-"));
    llm = await startHeldLlm();
  });
  afterEach(async () => {
    await stack?.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ["the job's per_day", "", `budget: { per_day: ${CAP} }\noverlap: allow`],
    ["countd's budget.per_day", `budget:\n  per_day: ${CAP}\n  timezone: UTC`, ""],
  ])("keeps four runs started at once within %s plus one call", async (_, daemonBudget, jobBudget) => {
    const yaml = [
      "provider:\n  preset: openai\n  model: held-model\n  max_tokens: 1000",
      "tools:\n  exec:\n    sandbox: none",
      "prices:\n  held-model: { input: 0, output: 10 }",
      daemonBudget,
    ].join("\n");
    stack = await openStack({
      dir,
      yaml,
      env: { OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: "sk-test-inflight-0123456789" },
      concurrency: 4,
    });
    for (const name of ["a", "b", "c", "d"])
      await stack.jobFile(name, [`name: ${name}`, `prompt: ${PROMPT} ${name}`, "tools: []", jobBudget].join("\n"));
    // A per-job cap is shared by the runs of one job: the same job four times, overlap allowed.
    const jobs = jobBudget ? ["a", "a", "a", "a"] : ["a", "b", "c", "d"];

    let ended = 0;
    const runs = jobs.map((name) => stack!.run(name).finally(() => ended++));
    const held: HeldRequest[] = [];
    // One take at a time: a take left waiting would swallow the next request.
    let taking = llm.take(PROMPT);
    while (held.length + ended < jobs.length) {
      const next = await Promise.race([taking, new Promise<undefined>((resolve) => setTimeout(resolve, 50))]);
      if (next) {
        held.push(next);
        taking = llm.take(PROMPT);
      }
    }
    for (const request of held) await request.end(CALL);
    const records: RunRecord[] = await Promise.all(runs);

    const spent = records.reduce((sum, record) => sum + (record.cost ?? 0), 0);
    // Admitted while what was spent and reserved stayed under $0.015: two calls, $0.02.
    expect(spent).toBeLessThanOrEqual(CAP + ONE_CALL + 1e-9);
    expect(held).toHaveLength(2);
    expect(records.map((record) => record.status).sort()).toEqual(["budget", "budget", "ok", "ok"]);
    expect(records.find((record) => record.status === "budget")?.error).toMatch(
      /daily budget.* of \$0\.0150 is spent or reserved: .* have cost \$0\.0000 on \d{4}-\d\d-\d\d \(UTC\), and calls in flight may cost up to \$0\.0200$/,
    );
  });
});
