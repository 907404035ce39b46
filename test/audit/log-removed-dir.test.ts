import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { AuditLog, localDate } from "../../src/audit/log.js";
import { EventBus } from "../../src/events.js";

const usage = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, cacheWriteTokens: 0 };
const message = (sessionId: string) => ({
  sessionId,
  status: "ok" as const,
  iterations: 1,
  toolCalls: 0,
  usage,
  cost: null,
  durationMs: 5,
});

let dir: string;
let stderr: string[];

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "countd-audit-removed-")), "logs");
  stderr = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    stderr.push(String(chunk));
    return true;
  });
});
afterEach(() => vi.restoreAllMocks());

it("recreates its folder when it was removed while countd runs, and keeps the line", async () => {
  const audit = new AuditLog({ dir, secrets: [] });
  audit.message(message("cron:a"));
  await rm(dir, { recursive: true });
  audit.message(message("cron:b"));
  await audit.close();
  const text = await readFile(join(dir, `audit-${localDate(new Date())}.jsonl`), "utf8");
  expect(text).toContain('"session":"cron:b"');
  expect(stderr).toEqual([`countd: the audit log folder ${dir} was removed while countd was running; created it again\n`]);
});

it("reports a line it cannot write, and writes again once the folder can be used", async () => {
  const audit = new AuditLog({ dir, secrets: [] });
  const bus = new EventBus();
  audit.attach(bus);
  bus.emit("message.finished", message("cron:a"));
  await rm(dir, { recursive: true });
  await writeFile(dir, "");
  bus.emit("message.finished", message("cron:lost"));
  expect(stderr.join("")).toMatch(new RegExp(`^countd: audit log write in ${dir} failed: `));
  await rm(dir);
  bus.emit("message.finished", message("cron:c"));
  await audit.close();
  const text = await readFile(join(dir, `audit-${localDate(new Date())}.jsonl`), "utf8");
  expect(text).toContain('"session":"cron:c"');
});
