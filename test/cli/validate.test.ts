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
