import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";
import { requestTokens, textTokens } from "../../src/cost/estimate.js";
import { jobToRehearse } from "../../src/rehearse/job-source.js";
import { formatPreview, previewRehearsal } from "../../src/rehearse/preview.js";
import { openRuntime, type Runtime } from "../../src/runtime.js";
import { fixtureServer } from "../mcp/support.js";

const ENV = {
  PATH: process.env["PATH"] ?? "",
  OPENAI_API_KEY: "sk-preview-test",
  OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
  HOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
};
/** A Monday, 06:00 in Berlin (UTC+1 in winter). */
const AT = new Date("2025-01-06T05:00:00Z");

describe("the rehearsal preview", { timeout: 60_000 }, () => {
  let dir: string;
  let config: Config;
  let runtime: Runtime;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-preview-"));
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "drafts"));
    await mkdir(join(dir, "workspace", "inbox"), { recursive: true });
    await writeFile(
      join(dir, "countd.yaml"),
      [
        "timezone: UTC",
        "tools:\n  exec:\n    enabled: false",
        `mcp_servers: ${JSON.stringify({ notes: fixtureServer() })}`,
        "prices:\n  house-priced:\n    input: 1\n    output: 2",
        "secrets: [HOOK_SECRET]\njob_env: [HOOK_SECRET]",
        "",
      ].join("\n"),
    );
    config = await loadConfig({ cwd: dir, env: ENV });
    runtime = await openRuntime(config, ENV);
  }, 60_000);
  afterAll(async () => {
    await runtime?.close();
  });

  it("shows a draft cron job's next five fires in its zone, its tools with their MCP server, and its size", async () => {
    const file = join(dir, "drafts", "digest.yaml");
    await writeFile(
      file,
      [
        "prompt: Digest for {{date}} ({{job.name}})",
        'schedule: "0 9 * * 1-5"',
        "timezone: Europe/Berlin",
        "tools: [read_file, mcp_notes_echo]",
        "",
      ].join("\n"),
    );
    const { job, file: found } = await jobToRehearse(config, file, { env: ENV });
    expect(found).toBe(file);
    const preview = await previewRehearsal(runtime, job, { at: AT });

    expect(preview.timezone).toBe("Europe/Berlin");
    expect(preview.trigger).toBe("cron 0 9 * * 1-5");
    expect(preview.fires).toEqual([
      "2025-01-06T08:00:00.000Z",
      "2025-01-07T08:00:00.000Z",
      "2025-01-08T08:00:00.000Z",
      "2025-01-09T08:00:00.000Z",
      "2025-01-10T08:00:00.000Z",
    ]);
    expect(preview.prompt).toBe("Digest for 2025-01-06 (digest)");
    expect(preview.tools).toEqual([{ name: "read_file" }, { name: "mcp_notes_echo", server: "notes" }]);

    // The figures are those of the request the run's first call would send.
    const offered = await runtime
      .loop({ toolNames: job.tools })
      .offered(preview.prompt, { channel: "cron", clock: { at: AT, timeZone: job.timezone } });
    const system = offered.messages.filter((message) => message.role === "system").map((message) => message.content as string);
    expect(system).toHaveLength(2);
    expect(preview.tokens.system).toBe(textTokens(system[0]!) + textTokens(system[1]!));
    expect(preview.tokens.prompt).toBe(textTokens("Digest for 2025-01-06 (digest)"));
    expect(preview.tokens.tools).toBe(textTokens(JSON.stringify(offered.definitions)));
    expect(preview.tokens.tools).toBeGreaterThan(0);
    expect(preview.limits).toEqual({ maxIterations: config.agent.maxIterations, maxTokens: config.provider.maxTokens });
    expect(preview.price!.low).toBeGreaterThan(0);
    expect(preview.price!.low).toBeLessThan(preview.price!.high);

    const text = formatPreview(preview);
    expect(text).toContain("Next fires (Europe/Berlin):\n  2025-01-06 09:00 +01:00\n  2025-01-07 09:00 +01:00\n");
    expect(text).toContain("Prompt:\n  Digest for 2025-01-06 (digest)\n");
    expect(text).toContain("  mcp_notes_echo (MCP server notes)\n");
    expect(text).toMatch(/^Size \(estimated tokens\): system \d+, prompt \d+, tools \d+, total \d+$/m);
  });

  it("prices the range from the model's price and the job's limits, and says when the model has none", async () => {
    await writeFile(
      join(dir, "jobs", "priced.yaml"),
      "prompt: hello\nmodel: house-priced\nmax_iterations: 3\nmax_tokens: 1000\ntools: []\n",
    );
    await writeFile(join(dir, "jobs", "local.yaml"), "prompt: hello\nmodel: house-llm-7b\n");
    const priced = await previewRehearsal(runtime, (await jobToRehearse(config, "priced", { env: ENV })).job, { at: AT });
    const offered = await runtime.loop({ toolNames: [], overrides: { model: "house-priced" } }).offered("hello", {
      channel: "cron",
      clock: { at: AT, timeZone: "UTC" },
    });
    const request = requestTokens(offered.messages, offered.definitions);
    // $1 a million in, $2 out: one call with 256 out; three calls of 1000 out, each sending the answers before it.
    expect(priced.price!.low).toBeCloseTo((request * 1 + 256 * 2) / 1e6, 12);
    expect(priced.price!.high).toBeCloseTo((3 * request + (0 + 1000 + 2000)) / 1e6 + (3 * 1000 * 2) / 1e6, 12);
    expect(priced.limits).toEqual({ maxIterations: 3, maxTokens: 1000 });

    const local = await previewRehearsal(runtime, (await jobToRehearse(config, "local", { env: ENV })).job, { at: AT });
    expect(local.price).toBeNull();
    expect(local.model).toBe("house-llm-7b");
    expect(formatPreview(local)).toContain("unpriced: house-llm-7b has no known price");
  });

  it("renders a watch job's {{files}} with the files given, and says what fires it", async () => {
    const file = join(dir, "drafts", "intake.yaml");
    await writeFile(file, 'prompt: "New files:\\n{{files}}"\nwatch:\n  paths: ["inbox/*.csv"]\ntools: []\n');
    const { job } = await jobToRehearse(config, file, { env: ENV });
    const preview = await previewRehearsal(runtime, job, { at: AT, files: ["inbox/2025-01-05.csv"] });
    expect(preview.prompt).toBe("New files:\ninbox/2025-01-05.csv");
    expect(preview.fires).toEqual([]);
    expect(preview.firesNote).toBe("no schedule: fired by changes (add, change) to inbox/*.csv");
    expect(formatPreview(preview)).toContain("Next fires (UTC):\n  no schedule: fired by changes (add, change) to inbox/*.csv\n");
  });

  it("frames a webhook job's payload as the run does", async () => {
    const file = join(dir, "drafts", "hook.yaml");
    await writeFile(file, "prompt: |\n  Handle this:\n  {{payload}}\nwebhook:\n  secret: ${HOOK_SECRET}\ntools: []\n");
    const { job } = await jobToRehearse(config, file, { env: ENV });
    const preview = await previewRehearsal(runtime, job, { at: AT, payload: '{"order": 42}' });
    expect(preview.prompt).toContain('{"order": 42}');
    expect(preview.prompt).toContain("untrusted");
    expect(preview.firesNote).toBe("no schedule: fired by a signed POST to /hooks/hook");
  });

  it("finds a disabled job by name, and shows its next fires", async () => {
    await writeFile(join(dir, "jobs", "later.yaml"), 'prompt: later\nschedule: "30 7 * * *"\nenabled: false\n');
    const { job } = await jobToRehearse(config, "later", { env: ENV });
    expect(job.enabled).toBe(false);
    const preview = await previewRehearsal(runtime, job, { at: AT });
    expect(preview.fires).toHaveLength(5);
    expect(preview.fires[0]).toBe("2025-01-06T07:30:00.000Z");
  });

  it("finds a job in another folder given by jobsDir", async () => {
    await writeFile(join(dir, "drafts", "weekly.yaml"), 'prompt: weekly\nschedule: "0 9 * * 1"\n');
    const { job, file } = await jobToRehearse(config, "weekly", { jobsDir: join(dir, "drafts"), env: ENV });
    expect(job.name).toBe("weekly");
    expect(file).toBe(join(dir, "drafts", "weekly.yaml"));
  });

  it("names an invalid file's problems at file:line:col", async () => {
    const file = join(dir, "drafts", "broken.yaml");
    await writeFile(file, 'prompt: hi\nschedule: "0 9 * * *"\ntimeout: soon\n');
    await expect(jobToRehearse(config, file, { env: ENV })).rejects.toThrow(/broken\.yaml is invalid:\n.*broken\.yaml:3:10: timeout: /);
  });

  it("names the jobs there are when the name is unknown", async () => {
    await expect(jobToRehearse(config, "nosuch", { env: ENV })).rejects.toThrow(/^no job named "nosuch" in .*jobs \(jobs: .*later/);
  });
});
