import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/load.js";
import { openRuntime } from "../src/runtime.js";
import { useAimock } from "./support/aimock.js";

describe("openRuntime", () => {
  const mock = useAimock();

  async function runtime(keys: Record<string, string> = { ANTHROPIC_API_KEY: "sk-ant-runtime-test" }) {
    const dir = await mkdtemp(join(tmpdir(), "countd-runtime-"));
    // Whether exec is offered under sandbox: auto depends on the machine having bwrap; these tests are about the rest.
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    const env = {
      OPENAI_BASE_URL: `${mock.url}/v1`,
      OPENAI_API_KEY: "sk-runtime-test",
      ANTHROPIC_BASE_URL: mock.url,
      ...keys,
    };
    const config = await loadConfig({ cwd: dir, env });
    return openRuntime(config, env);
  }

  it("gives each run the configured model, or a job's model and provider instead", async () => {
    mock.onMessage("hello", { content: "hi" });
    const rt = await runtime();
    await rt.loop().processDirect("hello", "a");
    await rt.loop({ overrides: { model: "gpt-4.1" } }).processDirect("hello", "b");
    await rt.loop({ overrides: { provider: "anthropic" } }).processDirect("hello", "c");
    const seen = mock.getRequests().map((r) => [r.path, (r.body as { model: string }).model]);
    expect(seen).toEqual([
      ["/v1/chat/completions", "gpt-4o-mini"],
      ["/v1/chat/completions", "gpt-4.1"],
      ["/v1/messages", "claude-sonnet-5"],
    ]);
    await rt.close();
  });

  it("tells whether a job's model has a price without making its provider, whose key may be missing", async () => {
    const rt = await runtime({});
    // The live stream asks this as each run starts: a run whose provider cannot be made must still show as started.
    expect(rt.priced()).toBe(true);
    expect(rt.priced({ model: "house-llm-7b" })).toBe(false);
    expect(rt.priced({ provider: "anthropic" })).toBe(true);
    expect(() => rt.loop({ overrides: { provider: "anthropic" } })).toThrow(/no API key for provider "anthropic"/);
    await rt.close();
  });

  it("offers a run only the tools it names, and spawn only when named", async () => {
    mock.onMessage("tools", { content: "ok" });
    const rt = await runtime();
    await rt.loop({ toolNames: ["read_file", "spawn"] }).processDirect("tools", "a");
    await rt.loop().processDirect("tools", "b");
    const names = mock
      .getRequests()
      .map((r) => (r.body as { tools: Array<{ function: { name: string } }> }).tools.map((t) => t.function.name));
    expect(names[0]).toEqual(["read_file", "spawn"]);
    expect(names[1]).toEqual(rt.toolNames);
    expect(rt.toolNames).toEqual([
      "read_file",
      "write_file",
      "edit_file",
      "list_dir",
      "file_search",
      "exec",
      "web_fetch",
      "memory_write",
      "memory_search",
      "memory_read",
      "spawn",
    ]);
    await rt.close();
  });
});
