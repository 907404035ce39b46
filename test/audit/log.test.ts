import { execFile } from "node:child_process";
import { mkdtemp, readFile, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { AuditLog, localDate } from "../../src/audit/log.js";
import { EventBus } from "../../src/events.js";

const API_KEY = "sk-live-9f8e7d6c5b4a";
const SMTP_PASSWORD = 'pa"ss\\word!';
const usage = { inputTokens: 120, outputTokens: 30, cachedInputTokens: 0, cacheWriteTokens: 0 };

let dir: string;
let clock: Date;
let log: AuditLog;
let bus: EventBus;

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "countd-audit-")), "logs");
  clock = new Date(2026, 10, 30, 23, 59, 0); // local time
  log = new AuditLog({ dir, secrets: [API_KEY, SMTP_PASSWORD, "abc"], now: () => clock });
  bus = new EventBus();
  log.attach(bus);
});

/** Lines are written off the main thread; close() resolves once they are all in their files. */
const fileText = async (day: string) => {
  await log.close();
  return readFile(join(dir, `audit-${day}.jsonl`), "utf8");
};
const lines = async (day: string) =>
  (await fileText(day))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

function runTool(callId: string, args: unknown, result: string, error?: string) {
  bus.emit("tool.started", { sessionId: "cron:daily-report", callId, name: "shell", arguments: args });
  bus.emit("tool.finished", {
    sessionId: "cron:daily-report",
    callId,
    name: "shell",
    arguments: args,
    result,
    durationMs: 42,
    attempts: error ? 3 : 1,
    ...(error ? { error } : {}),
  });
}

describe("AuditLog", () => {
  it("writes one line per tool call, LLM call and finished message, with their fields", async () => {
    runTool("c1", { command: "ls -la" }, "a.txt\nb.txt");
    runTool("c2", { command: "false" }, "exit code 1", "exit code 1");
    bus.emit("llm.finished", {
      sessionId: "cron:daily-report",
      model: "glm-4.7-flash",
      usage,
      cost: null,
      durationMs: 900,
      finishReason: "tool_calls",
      attempts: 2,
    });
    bus.emit("message.finished", {
      sessionId: "cron:daily-report",
      status: "ok",
      iterations: 2,
      toolCalls: 2,
      usage,
      cost: null,
      durationMs: 1500,
    });

    const [ok, failed, llm, message] = await lines("2026-11-30");
    expect(ok).toEqual({
      level: "info",
      time: expect.stringMatching(/^2026-11-30T23:59:00\.000[+-]\d\d:\d\d$/),
      kind: "tool",
      session: "cron:daily-report",
      callId: "c1",
      tool: "shell",
      arguments: { command: "ls -la" },
      status: "ok",
      attempts: 1,
      durationMs: 42,
      result: "a.txt\nb.txt",
    });
    expect(failed).toMatchObject({
      level: "error",
      kind: "tool",
      status: "error",
      attempts: 3,
      error: "exit code 1",
      arguments: { command: "false" },
    });
    expect(llm).toEqual({
      level: "info",
      time: expect.any(String),
      kind: "llm",
      session: "cron:daily-report",
      model: "glm-4.7-flash",
      usage,
      cost: null,
      durationMs: 900,
      finishReason: "tool_calls",
      attempts: 2,
    });
    expect(message).toMatchObject({ kind: "message", status: "ok", iterations: 2, toolCalls: 2, usage, durationMs: 1500 });
  });

  it("never writes a secret value, nor anything under a secret-named key", async () => {
    runTool(
      "c1",
      {
        command: `curl -H "Authorization: Bearer ${API_KEY}" https://example.test`,
        api_key: "not-in-the-secret-list",
        nested: { headers: [{ Authorization: "Basic dXNlcjpwdw==" }], clientSecret: 7, password: SMTP_PASSWORD },
      },
      `token is ${API_KEY}; smtp says ${SMTP_PASSWORD}`,
      `login failed for password ${SMTP_PASSWORD}`,
    );
    bus.emit("llm.finished", {
      sessionId: "cli",
      model: "m",
      usage,
      cost: null,
      durationMs: 1,
      finishReason: "error",
      attempts: 3,
      error: `401 Incorrect API key provided: ${API_KEY}`,
    });

    const text = await fileText("2026-11-30");
    for (const secret of [API_KEY, SMTP_PASSWORD, JSON.stringify(SMTP_PASSWORD).slice(1, -1), "not-in-the-secret-list", "dXNlcjpwdw=="]) {
      expect(text).not.toContain(secret);
    }
    const [tool, llm] = await lines("2026-11-30");
    expect(tool!.arguments).toEqual({
      command: 'curl -H "Authorization: Bearer [REDACTED]" https://example.test',
      api_key: "[REDACTED]",
      nested: { headers: [{ Authorization: "[REDACTED]" }], clientSecret: "[REDACTED]", password: "[REDACTED]" },
    });
    expect(tool!.result).toBe("token is [REDACTED]; smtp says [REDACTED]");
    expect(tool!.error).toBe("login failed for password [REDACTED]");
    expect(llm!.error).toBe("401 Incorrect API key provided: [REDACTED]");
    // Token counters are not secrets, and values shorter than 4 chars are not redacted.
    expect(llm!.usage).toEqual(usage);
    expect(llm!.model).toBe("m");
  });

  it("keeps a result excerpt of 2,000 chars with a truncation marker", async () => {
    runTool("c1", {}, "x".repeat(5_000));
    // A secret across the cut must not leave a readable prefix behind.
    runTool("c2", {}, "y".repeat(1_995) + API_KEY + "z".repeat(100));
    const [long, straddling] = await lines("2026-11-30");
    expect(long!.result).toBe("x".repeat(2_000) + "… [truncated: 5000 chars in all]");
    expect(straddling!.result).toMatch(/^y{1995}\[REDA… \[truncated: \d+ chars in all\]$/);
    expect(await fileText("2026-11-30")).not.toContain(API_KEY.slice(0, 5));
  });

  it("starts a new file when the local day changes", async () => {
    runTool("c1", {}, "before midnight");
    clock = new Date(2026, 11, 1, 0, 0, 1);
    runTool("c2", {}, "after midnight");
    await log.close();
    expect((await readdir(dir)).sort()).toEqual(["audit-2026-11-30.jsonl", "audit-2026-12-01.jsonl"]);
    expect((await lines("2026-11-30")).map((l) => l.result)).toEqual(["before midnight"]);
    expect((await lines("2026-12-01")).map((l) => [l.result, l.time])).toEqual([
      ["after midnight", expect.stringMatching(/^2026-12-01T00:00:01/)],
    ]);
  });

  it("stops recording after close()", async () => {
    runTool("c1", {}, "recorded");
    await log.close();
    runTool("c2", {}, "not recorded");
    expect((await lines("2026-11-30")).map((l) => l.result)).toEqual(["recorded"]);
  });

  it("reports a failed write on stderr instead of throwing into the agent loop", async () => {
    const parent = await mkdtemp(join(tmpdir(), "countd-audit-"));
    await writeFile(join(parent, "not-a-dir"), "");
    const broken = new AuditLog({ dir: join(parent, "not-a-dir", "logs"), secrets: [], now: () => clock });
    const otherBus = new EventBus();
    broken.attach(otherBus);
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(() =>
        otherBus.emit("llm.finished", {
          sessionId: "cli",
          model: "m",
          usage,
          cost: null,
          durationMs: 1,
          finishReason: "stop",
          attempts: 1,
        }),
      ).not.toThrow();
      expect(String(stderr.mock.calls[0]?.[0])).toContain(`audit log write in ${join(parent, "not-a-dir", "logs")} failed`);
    } finally {
      stderr.mockRestore();
    }
  });
});

describe("AuditLog in a process that exits without closing it", () => {
  it("has every line written before process.exit() in the file (a second SIGTERM, an uncaught error)", async () => {
    const dist = resolve(import.meta.dirname, "../../dist");
    const script = `const { AuditLog } = await import(${JSON.stringify(dist + "/audit/log.js")});
      const log = new AuditLog({ dir: ${JSON.stringify(dir)}, secrets: [] });
      const usage = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0 , cacheWriteTokens: 0};
      // Messages that ended, their lines handed to the file, then a run still under way.
      for (let i = 0; i < 300; i++) log.message({ sessionId: "cron:exit:" + i, status: "ok", iterations: 1, toolCalls: 0, usage, durationMs: 1 });
      for (let i = 300; i < 500; i++) log.toolCall({ sessionId: "cron:exit:" + i, callId: "c" + i, name: "ls", arguments: {}, result: "a.txt", durationMs: 1, attempts: 1 });
      process.exit(3);`;
    await expect(promisify(execFile)(process.execPath, ["--input-type=module", "-e", script])).rejects.toMatchObject({ code: 3 });
    const text = await readFile(join(dir, `audit-${localDate(new Date())}.jsonl`), "utf8");
    const sessions = text
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { session: string }).session);
    expect(sessions).toEqual(Array.from({ length: 500 }, (_, i) => `cron:exit:${i}`));
  });
});
