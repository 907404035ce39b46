import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { Pricer } from "../../src/cost/prices.js";
import type { Usage } from "../../src/providers/types.js";
import { startCachingLlm, type CachingLlm, type LlmFormat } from "../support/caching-llm.js";
import { auditLines, openStack, type CostStack } from "../support/cost-stack.js";

/*
 * What a call costs, as a user reads it in the audit log's llm line and in the run record
 * (`countd history --json`). Every expected figure is worked out here from per-million prices:
 * (input − cached − cache writes) × input + cached × cached_input + cache writes × cache_write
 * + output × output, over a million. The table's prices are those of the @pydantic/genai-prices
 * version countd bundles, looked up by hand:
 *   openai    gpt-4o-mini               input 0.15, cached 0.075, output 0.60
 *   anthropic claude-sonnet-4-20250514  input 3, cache read 0.30, cache write 3.75, output 15
 */

const usage = (u: Partial<Usage>): Usage => ({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, ...u });

async function pricesFrom(yaml: string): Promise<Pricer> {
  const dir = await mkdtemp(join(tmpdir(), "countd-prices-"));
  try {
    await writeFile(join(dir, "countd.yaml"), yaml);
    return new Pricer((await loadConfig({ cwd: dir, env: {} })).prices);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe("Pricer with countd.yaml's prices:", () => {
  const call = usage({ inputTokens: 1_000_000, cachedInputTokens: 400_000, cacheWriteTokens: 100_000, outputTokens: 200_000 });

  it("charges cached and cache-written input at the input price when the override names neither", async () => {
    const pricer = await pricesFrom("prices:\n  my-local-model: { input: 2, output: 8 }\n");
    // 500k × 2 + 400k × 2 + 100k × 2 + 200k × 8 = 1.0 + 0.8 + 0.2 + 1.6
    expect(pricer.cost({ preset: "custom", baseURL: "http://127.0.0.1:9/v1", model: "my-local-model" }, call)).toBeCloseTo(3.6, 12);
  });

  it("charges each part at its own price when the override names them", async () => {
    const pricer = await pricesFrom("prices:\n  my-local-model: { input: 2, cached_input: 0.5, cache_write: 2.5, output: 8 }\n");
    // 500k × 2 + 400k × 0.5 + 100k × 2.5 + 200k × 8 = 1.0 + 0.2 + 0.25 + 1.6
    expect(pricer.cost({ preset: "custom", baseURL: "http://127.0.0.1:9/v1", model: "my-local-model" }, call)).toBeCloseTo(3.05, 12);
  });

  it("defaults cache writes to the input price, not to the cached price", async () => {
    const pricer = await pricesFrom("prices:\n  m: { input: 1, cached_input: 0.1, output: 0 }\n");
    // 500k × 1 + 400k × 0.1 + 100k × 1
    expect(pricer.cost({ preset: "openai", model: "m" }, call)).toBeCloseTo(0.64, 12);
  });

  it("prices a free local model at 0, which is not unpriced", async () => {
    const pricer = await pricesFrom("prices:\n  my-local-model: { input: 0, output: 0 }\n");
    const ref = { preset: "ollama" as const, baseURL: "http://127.0.0.1:11434/v1", model: "my-local-model" };
    expect(pricer.cost(ref, call)).toBe(0);
    expect(pricer.priced(ref)).toBe(true);
  });

  it("puts an override before the bundled table", async () => {
    const pricer = await pricesFrom("prices:\n  gpt-4o-mini: { input: 1, output: 1 }\n");
    // 1M input and 200k output at 1 per million each, where the table would say 0.15/0.075/0.60.
    expect(pricer.cost({ preset: "openai", model: "gpt-4o-mini" }, call)).toBeCloseTo(1.2, 12);
  });

  it("prices table models from the table, and leaves a model in neither unpriced (null)", () => {
    const pricer = new Pricer();
    // 500k × 0.15 + 400k × 0.075 + 100k × 0.15 (no cache-write price: the input price) + 200k × 0.60
    expect(pricer.cost({ preset: "openai", model: "gpt-4o-mini" }, call)).toBeCloseTo(0.075 + 0.03 + 0.015 + 0.12, 12);
    // 500k × 3 + 400k × 0.30 + 100k × 3.75 + 200k × 15
    expect(pricer.cost({ preset: "anthropic", model: "claude-sonnet-4-20250514" }, call)).toBeCloseTo(1.5 + 0.12 + 0.375 + 3, 12);
    expect(pricer.cost({ preset: "openai", model: "countd-unlisted-model" }, call)).toBeNull();
    expect(pricer.priced({ preset: "openai", model: "countd-unlisted-model" })).toBe(false);
    // A local server's model is not priced as some vendor's model of the same name.
    expect(pricer.cost({ preset: "custom", baseURL: "http://127.0.0.1:9/v1", model: "gpt-4o-mini" }, call)).toBeNull();
  });
});

/** One call's usage as the server reports it: 10,000 input tokens of which 4,000 cached (and, for Anthropic, 2,000 written), 500 output. */
const REPORTED: Record<LlmFormat, { input: number; output: number; cached: number; cacheWrite: number }> = {
  openai: { input: 10_000, output: 500, cached: 4_000, cacheWrite: 0 },
  anthropic: { input: 10_000, output: 500, cached: 4_000, cacheWrite: 2_000 },
};

const CASES: Record<
  LlmFormat,
  {
    preset: string;
    key: string;
    url: (server: CachingLlm) => Record<string, string>;
    table: { model: string; call: number };
    override: number;
  }
> = {
  openai: {
    preset: "openai",
    key: "OPENAI_API_KEY",
    url: (server) => ({ OPENAI_BASE_URL: `${server.url}/v1` }),
    // 6,000 × 0.15 + 4,000 × 0.075 + 500 × 0.60 = 900 + 300 + 300 per million
    table: { model: "gpt-4o-mini", call: 0.0015 },
    // With { input: 1, cached_input: 0.1, cache_write: 1.25, output: 2 }: 6,000 × 1 + 4,000 × 0.1 + 500 × 2
    override: 0.0074,
  },
  anthropic: {
    preset: "anthropic",
    key: "ANTHROPIC_API_KEY",
    url: (server) => ({ ANTHROPIC_BASE_URL: server.url }),
    // 4,000 × 3 + 4,000 × 0.30 + 2,000 × 3.75 + 500 × 15 = 12,000 + 1,200 + 7,500 + 7,500 per million
    table: { model: "claude-sonnet-4-20250514", call: 0.0282 },
    // With { input: 1, cached_input: 0.1, cache_write: 1.25, output: 2 }: 4,000 × 1 + 4,000 × 0.1 + 2,000 × 1.25 + 500 × 2
    override: 0.0079,
  },
};

describe.each<LlmFormat>(["openai", "anthropic"])("a run's calls priced end to end (%s wire format)", (format) => {
  const { preset, key, url, table, override } = CASES[format];
  let server: CachingLlm;
  let dir: string;
  let stack: CostStack;

  beforeAll(async () => {
    server = await startCachingLlm();
  });
  afterAll(() => server.close());
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-priced-"));
    server.requests.length = 0;
  });
  afterEach(async () => {
    await stack?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function open(model: string, prices = ""): Promise<void> {
    const yaml = `provider:\n  preset: ${preset}\n  model: ${model}\ntools:\n  exec:\n    sandbox: none\n${prices}`;
    stack = await openStack({ dir, yaml, env: { ...url(server), [key]: "sk-test-prices-0123456789" } });
    await writeFile(join(stack.config.paths.workspace, "notes.txt"), "Water the plants on Friday.\n");
  }

  /** The model reads notes.txt, then answers: two calls, each reporting REPORTED's usage. */
  function readThenAnswer(): void {
    server.answer(({ body }) => {
      const sent = JSON.stringify(body.messages);
      const hasResult = format === "openai" ? sent.includes('"role":"tool"') : sent.includes('"tool_result"');
      return hasResult
        ? { text: "Friday: water the plants.", usage: REPORTED[format] }
        : { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }], usage: REPORTED[format] };
    });
  }

  async function runNotes() {
    stack.job("notes", "What is due this week in notes.txt?", { tools: ["read_file"] });
    readThenAnswer();
    const record = await stack.run("notes");
    await stack.close();
    const llm = (await auditLines(stack.config.paths.logs, "llm")).filter((line) => line.session === record.sessionId);
    const saved = (await stack.state.runs("notes")).find((run) => run.id === record.id);
    return { record, llm, saved };
  }

  it("prices each call from countd.yaml's override, and the run as their sum", async () => {
    await open(table.model, `prices:\n  ${table.model}: { input: 1, cached_input: 0.1, cache_write: 1.25, output: 2 }\n`);
    const { record, llm, saved } = await runNotes();

    expect(server.requests.map((r) => [r.format, r.model])).toEqual([
      [format, table.model],
      [format, table.model],
    ]);
    expect(llm).toHaveLength(2);
    for (const line of llm) {
      expect(line.usage).toEqual({
        inputTokens: 10_000,
        outputTokens: 500,
        cachedInputTokens: 4_000,
        cacheWriteTokens: REPORTED[format].cacheWrite,
      });
      expect(line.cost).toBeCloseTo(override, 12);
    }
    expect(record).toMatchObject({
      status: "ok",
      model: table.model,
      usage: { inputTokens: 20_000, cachedInputTokens: 8_000, outputTokens: 1_000 },
    });
    expect(record.cost).toBeCloseTo(2 * override, 12);
    expect(saved?.cost).toBeCloseTo(2 * override, 12);
  });

  it(`prices a table model (${table.model}) from the bundled table`, async () => {
    await open(table.model);
    const { record, llm, saved } = await runNotes();

    expect(llm.map((line) => line.cost)).toEqual([expect.closeTo(table.call, 12), expect.closeTo(table.call, 12)]);
    expect(record.cost).toBeCloseTo(2 * table.call, 12);
    expect(saved).toMatchObject({ status: "ok", model: table.model, cost: expect.closeTo(2 * table.call, 12) });
  });

  it("records an unpriced model's cost as null, never 0, with its tokens counted", async () => {
    await open("countd-unlisted-model");
    const { record, llm, saved } = await runNotes();

    expect(llm.map((line) => [line.model, line.cost])).toEqual([
      ["countd-unlisted-model", null],
      ["countd-unlisted-model", null],
    ]);
    expect(record).toMatchObject({
      status: "ok",
      cost: null,
      model: "countd-unlisted-model",
      usage: { inputTokens: 20_000, outputTokens: 1_000 },
    });
    expect(saved?.cost).toBeNull();
    const messageLine = (await auditLines(stack.config.paths.logs, "message")).find((line) => line.session === record.sessionId);
    expect(messageLine?.cost).toBeNull();
  });
});
