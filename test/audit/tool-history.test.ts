import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { Redactor } from "../../src/audit/redact.js";
import { ToolHistory } from "../../src/audit/tool-history.js";

const TOKEN = "ghp_0123456789abcdef";

let stateDir: string;
let history: ToolHistory;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-tool-history-"));
  history = new ToolHistory(stateDir, new Redactor([TOKEN]));
});

describe("ToolHistory", () => {
  it("keeps each session's tool calls apart, oldest first, across a restart", async () => {
    const at = new Date("2026-11-30T09:00:00Z");
    history.record({ sessionId: "cli", toolName: "ls", arguments: { path: "." }, userMessage: "list", result: "a.txt", durationMs: 3, at });
    history.record({
      sessionId: "cron:daily-report:20261130T090000Z",
      toolName: "web_fetch",
      arguments: { url: "https://example.test" },
      userMessage: "report",
      result: "<html>",
      durationMs: 120,
      at,
    });
    history.record({
      sessionId: "cli",
      toolName: "read_file",
      arguments: { path: "a.txt" },
      userMessage: "show a",
      result: "hello",
      durationMs: 1,
      at,
    });
    await history.close();

    const restarted = new ToolHistory(stateDir, new Redactor([]));
    expect(await restarted.read("cli")).toEqual([
      {
        at: "2026-11-30T09:00:00.000Z",
        sessionId: "cli",
        toolName: "ls",
        arguments: { path: "." },
        userMessage: "list",
        result: "a.txt",
        durationMs: 3,
      },
      {
        at: "2026-11-30T09:00:00.000Z",
        sessionId: "cli",
        toolName: "read_file",
        arguments: { path: "a.txt" },
        userMessage: "show a",
        result: "hello",
        durationMs: 1,
      },
    ]);
    expect((await restarted.read("cron:daily-report:20261130T090000Z")).map((r) => r.toolName)).toEqual(["web_fetch"]);
    expect(await restarted.read("nothing-yet")).toEqual([]);
    expect(await readdir(join(stateDir, "tool-history"))).toHaveLength(2);
  });

  it("stores no secret value and nothing under a secret-named key", async () => {
    history.record({
      sessionId: "cli",
      toolName: "shell",
      arguments: { command: `git clone https://${TOKEN}@example.test/r.git`, env: { GITHUB_TOKEN: "other" } },
      userMessage: `use my token ${TOKEN}`,
      result: `cloned with ${TOKEN}`,
      durationMs: 10,
    });
    await history.flush("cli");
    const text = await readFile(join(stateDir, "tool-history", "cli.jsonl"), "utf8");
    expect(text).not.toContain(TOKEN);
    const [rec] = await history.read("cli");
    expect(rec).toMatchObject({
      arguments: { command: "git clone https://[REDACTED]@example.test/r.git", env: { GITHUB_TOKEN: "[REDACTED]" } },
      userMessage: "use my token [REDACTED]",
      result: "cloned with [REDACTED]",
    });
  });

  it("records concurrent calls whole", async () => {
    const big = "r".repeat(100_000);
    await Promise.all(
      Array.from({ length: 30 }, (_, i) => {
        history.record({ sessionId: "cli", toolName: `t${i}`, arguments: {}, userMessage: "go", result: big, durationMs: i });
        return history.flush("cli");
      }),
    );
    const records = await history.read("cli");
    expect(records.map((r) => r.toolName)).toEqual(Array.from({ length: 30 }, (_, i) => `t${i}`));
    expect(records.every((r) => r.result === big)).toBe(true);
  });

  it("keeps records in memory until their session is flushed, then appends them in one write", async () => {
    const file = join(stateDir, "tool-history", "cli.jsonl");
    history.record({ sessionId: "cli", toolName: "ls", arguments: {}, userMessage: "go", result: "a", durationMs: 1 });
    history.record({ sessionId: "cli", toolName: "cat", arguments: {}, userMessage: "go", result: "b", durationMs: 1 });
    await expect(readFile(file, "utf8")).rejects.toThrow(/ENOENT/);
    await history.flush("cli");
    expect(
      (await readFile(file, "utf8"))
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { toolName: string }).toolName),
    ).toEqual(["ls", "cat"]);
  });

  it("creates its folder again when it was removed while countd runs", async () => {
    history.record({ sessionId: "cli", toolName: "ls", arguments: {}, userMessage: "go", result: "a", durationMs: 1 });
    await history.flush("cli");
    await rm(join(stateDir, "tool-history"), { recursive: true });
    history.record({ sessionId: "cli", toolName: "cat", arguments: {}, userMessage: "go", result: "b", durationMs: 1 });
    await history.flush("cli");
    expect((await new ToolHistory(stateDir, new Redactor([])).read("cli")).map((r) => r.toolName)).toEqual(["cat"]);
  });

  it("keeps records whose flush failed for the next one, in order", async () => {
    await writeFile(join(stateDir, "tool-history"), "a file where the folder should be\n");
    history.record({ sessionId: "cli", toolName: "ls", arguments: {}, userMessage: "go", result: "a", durationMs: 1 });
    await expect(history.flush("cli")).rejects.toThrow();
    history.record({ sessionId: "cli", toolName: "cat", arguments: {}, userMessage: "go", result: "b", durationMs: 1 });
    await rm(join(stateDir, "tool-history"));
    await history.close();
    expect((await new ToolHistory(stateDir, new Redactor([])).read("cli")).map((r) => r.toolName)).toEqual(["ls", "cat"]);
  });
});
