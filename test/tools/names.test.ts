import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { MemoryStore } from "../../src/memory/store.js";
import { builtinTools } from "../../src/tools/builtin.js";
import { toolNames } from "../../src/tools/names.js";

/*
 * Job files are checked against the tool names alone, so the commands that check them need none
 * of the tools' code; the names must still be exactly the tools a run is offered.
 */
describe("the tool names a job's tools: is checked against", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-tool-names-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ["with exec", "timezone: UTC\n", true],
    ["with exec switched off", "tools:\n  exec:\n    enabled: false\n", false],
  ])("are the built-in tools, in their order, and spawn (%s)", async (_, yaml, exec) => {
    await writeFile(join(dir, "countd.yaml"), yaml);
    const config = await loadConfig({ cwd: dir, env: {} });
    const built = builtinTools(config, new MemoryStore(config.paths.workspace)).names;
    expect(toolNames(config)).toEqual([...built, "spawn"]);
    expect(toolNames(config).includes("exec")).toBe(exec);
  });
});
