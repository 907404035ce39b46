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
