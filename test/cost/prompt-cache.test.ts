import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Job } from "../../src/jobs/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { firstPrefixTokens, startCachingLlm, type CachingLlm, type LlmFormat } from "../support/caching-llm.js";
import { auditLines, openStack, type AuditLine, type CostStack } from "../support/cost-stack.js";

/*
 * countd keeps its system prompt byte-stable from run to run, so a provider's prompt cache serves
 * it again: the same job run twice shows cached input tokens on its second run, in the run record
 * and the audit log's llm line, in both wire formats. The server (test/support/caching-llm.ts)
 * caches a prefix only when an earlier request had it byte for byte, the system prompt included
 * (OpenAI: model, tools and the first message; Anthropic: tools and system up to the
 * cache_control breakpoint): a system prompt that changed between runs (a timestamp in it, a
 * reordered tool list) would find nothing cached and fail these tests. The last test shows that
 * happen when the persona changes.
 */

const PROMPT = [
  "Read the sales notes in the workspace and write a short digest for the team:",
  "the week's totals, the three largest orders, anything unusual, and open questions.",
  "Keep it under ten lines, plain text, no tables.",
].join(" ");

const SETUPS: Record<LlmFormat, { preset: string; model: string; env: (server: CachingLlm) => Record<string, string> }> = {
  openai: {
    preset: "openai",
    model: "gpt-4o-mini",
    env: (server) => ({ OPENAI_BASE_URL: `${server.url}/v1`, OPENAI_API_KEY: "sk-test-cache-0123456789" }),
  },
  anthropic: {
    preset: "anthropic",
    model: "claude-sonnet-4-20250514",
    env: (server) => ({ ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: "sk-ant-test-cache-0123456789" }),
  },
};

describe.each<LlmFormat>(["openai", "anthropic"])("the prompt cache across runs of one job (%s wire format)", (format) => {
  const { preset, model, env } = SETUPS[format];
  let server: CachingLlm;
  let dir: string;
  let stacks: CostStack[];

  beforeAll(async () => {
    server = await startCachingLlm();
  });
  afterAll(() => server.close());
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-cache-"));
    stacks = [];
    server.requests.length = 0;
    server.clearCache();
    server.answer(() => ({ text: "Totals: 42 orders. Nothing unusual." }));
  });
  afterEach(async () => {
    for (const stack of stacks) await stack.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function countd(persona = "countd", jobs = new Map<string, Job>()): Promise<CostStack> {
    const yaml = [
      `provider:\n  preset: ${preset}\n  model: ${model}`,
      `persona:\n  name: ${persona}`,
      "tools:\n  exec:\n    sandbox: none",
    ].join("\n");
    const stack = await openStack({ dir, yaml, env: env(server), jobs });
    stacks.push(stack);
    stack.job("digest", PROMPT, { tools: ["list_dir", "read_file", "write_file"] });
    return stack;
  }

  /** Each run's one llm audit line, read once everything is closed. */
  async function llmLines(stack: CostStack, runs: RunRecord[]): Promise<AuditLine[]> {
    await stack.close();
    const lines = await auditLines(stack.config.paths.logs, "llm");
    return runs.map((run) => {
      const own = lines.filter((line) => line.session === run.sessionId);
      expect(own).toHaveLength(1);
      return own[0]!;
    });
  }

  it("shows cached input tokens on the second run, in the run record and the audit line", async () => {
    const stack = await countd();
    const first = await stack.run("digest");
    const second = await stack.run("digest");
    expect([first.status, second.status]).toEqual(["ok", "ok"]);
    expect(server.requests).toHaveLength(2);
    const [lineOne, lineTwo] = await llmLines(stack, [first, second]);

    // What the second run must find cached: its tools and system prompt at least.
    const stable = firstPrefixTokens(format, server.requests[1]!.body);
    expect(stable).toBeGreaterThan(0);
    expect(first.usage.cachedInputTokens).toBe(0);
    expect(second.usage.cachedInputTokens).toBeGreaterThanOrEqual(stable);
    expect(second.usage.cachedInputTokens).toBeLessThanOrEqual(second.usage.inputTokens);
    if (format === "anthropic") {
      // The first run wrote the prefix up to the breakpoint; the second read exactly that and wrote nothing.
      expect(first.usage.cacheWriteTokens).toBe(stable);
      expect(second.usage).toMatchObject({ cachedInputTokens: stable, cacheWriteTokens: 0 });
    }
    expect(lineOne!.usage).toEqual(first.usage);
    expect(lineTwo!.usage).toEqual(second.usage);
    // A user sees the cache in the price too: cached input costs less than fresh or written input.
    expect(second.cost).toBeLessThan(first.cost!);
    expect(lineTwo!.cost).toBeCloseTo(second.cost!, 12);
  });

  it("finds nothing cached when the system prompt changed between runs (the persona was renamed)", async () => {
    const jobs = new Map<string, Job>();
    const before = await countd("countd", jobs);
    const first = await before.run("digest");
    await before.close();
    const after = await countd("Ada", jobs);
    const second = await after.run("digest");
    await after.close();

    expect(server.requests).toHaveLength(2);
    expect(JSON.stringify(server.requests[1]!.body)).toContain("Ada");
    expect(first.usage.cachedInputTokens).toBe(0);
    expect(second.usage.cachedInputTokens).toBe(0);
    if (format === "anthropic") expect(second.usage.cacheWriteTokens).toBeGreaterThan(0);
  });
});
