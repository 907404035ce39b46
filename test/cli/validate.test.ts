import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { runCountd } from "../support/daemon-process.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-validate-"));
  await mkdir(join(dir, "jobs"));
});

/** No provider key and no SMTP password: how the `countd` user runs a command without the unit's EnvironmentFile. */
const countd = (args: string[], env: Record<string, string> = {}) => runCountd(args, { cwd: dir, env });

describe("tool names in job files", () => {
  it.each([
    ["validate", ["validate"]],
    ["jobs", ["jobs"]],
  ])("countd %s refuses an unknown tool name, as run and start do", async (_name, args) => {
    await writeFile(join(dir, "jobs", "typo.yaml"), "prompt: x\ntools: [read_fil, list_dir]\n");
    const result = await countd(args);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('jobs/typo.yaml:2:9: tools[0]: unknown tool "read_fil" (known: read_file,');
  });

  it("countd run refuses the same file with the same problem", async () => {
    await writeFile(join(dir, "jobs", "typo.yaml"), "prompt: x\ntools: [read_fil, list_dir]\n");
    const result = await countd(["run", "typo"], { OPENAI_API_KEY: "sk-validate-test" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('jobs/typo.yaml:2:9: tools[0]: unknown tool "read_fil" (known: read_file,');
  });

  it("checks against the tools the configuration enables", async () => {
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    enabled: false\n");
    await writeFile(join(dir, "jobs", "shell.yaml"), "prompt: x\ntools: [exec]\n");
    await writeFile(join(dir, "jobs", "files.yaml"), "prompt: x\ntools: [read_file, spawn, memory_write]\n");
    const result = await countd(["validate"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^jobs\/shell\.yaml:2:9: tools\[0\]: unknown tool "exec" \(known: read_file, .*spawn\)$/m);
    expect(result.stderr).not.toContain("files.yaml");
    expect(result.stdout).toContain("1 problem in jobs/ (1 job valid)");
  });
});

describe("unpriced models", () => {
  const warning = (file: string, model: string, provider: string) =>
    `${file}: warning: model "${model}" (provider ${provider}) has no price: its runs are recorded with cost null; add it under prices: to count it against budgets in USD`;

  it("warns once per unpriced model a job or the heartbeat uses, at the file that chose it; warnings keep exit 0", async () => {
    await writeFile(
      join(dir, "countd.yaml"),
      "provider: { preset: ollama }\nheartbeat:\n  enabled: true\n  model: qwen2.5\n  deliver:\n    - email: { to: [me@example.com] }\n",
    );
    // Three jobs on countd.yaml's llama3.1, one naming it itself (the same model: no second warning).
    for (const name of ["a", "b", "c"]) await writeFile(join(dir, "jobs", `${name}.yaml`), "prompt: x\n");
    await writeFile(join(dir, "jobs", "d.yaml"), "prompt: x\nmodel: llama3.1\n");
    await writeFile(join(dir, "jobs", "e.yaml"), "prompt: x\nmodel: mistral-nemo\n");
    // Priced: OpenAI's model through OpenAI's preset; a local model given a price in countd.yaml would be too.
    await writeFile(join(dir, "jobs", "f.yaml"), "prompt: x\nprovider: openai\nmodel: gpt-4o-mini\n");
    const result = await countd(["validate"]);
    expect(result).toMatchObject({ code: 0, stdout: "6 jobs valid in jobs/ (3 warnings)\n" });
    expect(result.stderr).toBe(
      [
        warning("countd.yaml", "llama3.1", "ollama"),
        warning("jobs/e.yaml", "mistral-nemo", "ollama"),
        warning("countd.yaml", "qwen2.5", "ollama"),
        "",
      ].join("\n"),
    );
  });

  it("says nothing of a model priced under prices:, nor of the heartbeat when it is off", async () => {
    await writeFile(
      join(dir, "countd.yaml"),
      "provider: { preset: ollama }\nprices:\n  llama3.1: { input: 0, output: 0 }\nheartbeat:\n  model: qwen2.5\n",
    );
    await writeFile(join(dir, "jobs", "a.yaml"), "prompt: x\n");
    expect(await countd(["validate"])).toMatchObject({ code: 0, stdout: "1 job valid in jobs/\n", stderr: "" });
  });
});

describe("approve: blocks", () => {
  const push = 'approve:\n  rules:\n    - exec: "git push *"\n';

  it("reports a job's approve: that has nobody to ask, at its key", async () => {
    await writeFile(join(dir, "jobs", "push.yaml"), `prompt: x\n${push}`);
    await writeFile(join(dir, "jobs", "asks.yaml"), `prompt: x\n${push}  ask:\n    - email: { to: [me@example.com] }\n`);
    await writeFile(join(dir, "jobs", "fails.yaml"), `prompt: x\n${push}on_failure:\n  - email: { to: [me@example.com] }\n`);
    const result = await countd(["validate"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "jobs/push.yaml:2:1: approve: nobody would be asked: it has no ask: and the job has no on_failure: targets; add ask: (delivery targets, as in deliver:) or on_failure:\n",
    );
    expect(result.stdout).toContain("1 problem in jobs/");
  });

  it("reports countd.yaml's approve: with no ask: where a job that takes it has no on_failure: targets", async () => {
    await writeFile(join(dir, "countd.yaml"), `timezone: UTC\n${push}`);
    await writeFile(join(dir, "jobs", "a.yaml"), "prompt: x\n");
    await writeFile(join(dir, "jobs", "b.yaml"), "prompt: x\non_failure:\n  - email: { to: [me@example.com] }\n");
    await writeFile(join(dir, "jobs", "c.yaml"), "prompt: x\n");
    const result = await countd(["validate"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "countd.yaml:2:1: approve: nobody would be asked for the jobs a, c: it has no ask: and they have no on_failure: targets; add ask: here, or on_failure: to those jobs\n",
    );
  });

  it("warns of an exec: rule while exec is off, and of a tool: rule no tool of the job matches", async () => {
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    enabled: false\n");
    await writeFile(
      join(dir, "jobs", "rules.yaml"),
      [
        "prompt: x",
        "approve:",
        "  rules:",
        '    - exec: "git push *"',
        '    - tool: "web-fetch"',
        '    - tool: "mcp_github_*"',
        '    - tool: "write_*"',
        "  ask:",
        "    - email: { to: [me@example.com] }",
        "",
      ].join("\n"),
    );
    await writeFile(
      join(dir, "jobs", "narrow.yaml"),
      'prompt: x\ntools: [read_file]\napprove:\n  rules:\n    - tool: "write_file"\n  ask:\n    - email: { to: [me@example.com] }\n',
    );
    const result = await countd(["validate"]);
    expect(result).toMatchObject({ code: 0, stdout: "2 jobs valid in jobs/ (3 warnings)\n" });
    expect(result.stderr).toBe(
      [
        'jobs/narrow.yaml:5:13: warning: approve.rules[0].tool: "write_file" names no tool this job can have (its tools: read_file): the rule never matches',
        "jobs/rules.yaml:4:13: warning: approve.rules[0].exec: the exec tool is switched off in countd.yaml (tools.exec.enabled: false): the rule never matches",
        `jobs/rules.yaml:5:13: warning: approve.rules[1].tool: "web-fetch" names no tool this job can have (its tools: read_file, write_file, edit_file, list_dir, file_search, web_fetch, memory_write, memory_search, memory_read, spawn): the rule never matches`,
        "",
      ].join("\n"),
    );
  });

  it("places a bad rule and a bad timeout in a job file and in countd.yaml at their line and column", async () => {
    await writeFile(
      join(dir, "jobs", "bad.yaml"),
      'prompt: x\napprove:\n  rules:\n    - exec: ""\n    - foo: x\n  timeout: soon\n  ask:\n    - email: { to: [me@example.com] }\n',
    );
    const result = await countd(["validate"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('jobs/bad.yaml:4:13: approve.rules[0].exec: expected a non-empty string, got ""\n');
    expect(result.stderr).toContain("jobs/bad.yaml:5:7: approve.rules[1].foo: unknown key\n");
    expect(result.stderr).toContain(
      'jobs/bad.yaml:6:12: approve.timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"\n',
    );
    await writeFile(join(dir, "countd.yaml"), "approve:\n  rules:\n    - tool: mcp_*\n  timeout: -1h\n");
    const config = await countd(["validate"]);
    expect(config.code).toBe(78);
    expect(config.stderr).toMatch(/^countd\.yaml:4:12: approve\.timeout: expected a positive duration/m);
  });
});
