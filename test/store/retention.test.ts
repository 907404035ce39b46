import { mkdir, mkdtemp, readdir, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { localDate } from "../../src/audit/log.js";
import type { RetentionConfig } from "../../src/config/schema.js";
import { sessionFileName } from "../../src/sessions/file-names.js";
import { Retention } from "../../src/store/retention.js";
import { captureLog, type LogLine } from "../support/log-capture.js";

const DAY = 24 * 3_600_000;
const NOW = new Date();
const THIRTY_DAYS: RetentionConfig = { sessionsMs: 30 * DAY, toolHistoryMs: 30 * DAY, auditMs: 30 * DAY };

let root: string;
let stateDir: string;
let logsDir: string;
let log: ReturnType<typeof captureLog>["log"];
let lines: LogLine[];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "countd-retention-"));
  stateDir = join(root, "state");
  logsDir = join(root, "logs");
  await Promise.all([join(stateDir, "sessions"), join(stateDir, "tool-history"), logsDir].map((dir) => mkdir(dir, { recursive: true })));
  ({ log, lines } = captureLog());
});

/** A file last written `daysAgo` days ago. */
async function file(path: string, daysAgo: number): Promise<void> {
  await writeFile(path, '{"role":"user","content":"hi"}\n');
  const at = new Date(NOW.getTime() - daysAgo * DAY);
  await utimes(path, at, at);
}

const session = (id: string) => join(stateDir, "sessions", sessionFileName(id));
const toolHistory = (id: string) => join(stateDir, "tool-history", sessionFileName(id));
const list = async (dir: string) => (await readdir(dir)).sort();

function retention(opts: { retention?: RetentionConfig; inUse?: string[] } = {}): Retention {
  return new Retention({
    settings: () => ({ stateDir, logsDir, retention: opts.retention ?? THIRTY_DAYS }),
    sessionsInUse: () => new Set(opts.inUse ?? []),
    log,
    now: () => NOW,
  });
}

describe("Retention", () => {
  it("removes run journals and the texts they reference after retention.sessions, keeping a text a recent run used", async () => {
    const jobDir = join(stateDir, "journal", "report");
    const blobs = join(stateDir, "journal", "blobs");
    await mkdir(jobDir, { recursive: true });
    await mkdir(blobs, { recursive: true });
    await file(join(jobDir, "20261001T090000Z-aaaa.jsonl"), 31);
    await file(join(jobDir, "20261120T090000Z-bbbb.jsonl"), 10);
    await file(join(blobs, "a".repeat(64)), 31);
    // Written first long ago, and touched by the run of 10 days ago that used it again.
    await file(join(blobs, "b".repeat(64)), 10);
    const report = await retention({ retention: { ...THIRTY_DAYS, toolHistoryMs: DAY, auditMs: DAY } }).prune();
    expect(report).toMatchObject({ journals: 2, failed: 0 });
    expect(await list(jobDir)).toEqual(["20261120T090000Z-bbbb.jsonl"]);
    expect(await list(blobs)).toEqual(["b".repeat(64)]);
  });

  it("removes transcripts, tool history and audit files last written longer ago than their period, and keeps the rest", async () => {
    await file(session("cron:report:20261001T090000Z-aaaa"), 31);
    await file(session("cron:report:20261120T090000Z-bbbb"), 10);
    await file(toolHistory("cron:report:20261001T090000Z-aaaa"), 31);
    await file(toolHistory("cron:report:20261125T090000Z-cccc"), 5);
    await file(join(logsDir, "audit-2026-10-01.jsonl"), 61);
    await file(join(logsDir, "audit-2026-11-01.jsonl"), 29);
    // The calls' prices are kept as long as the audit lines of those calls.
    await mkdir(join(stateDir, "spend"));
    await file(join(stateDir, "spend", "2026-10-01.jsonl"), 61);
    await file(join(stateDir, "spend", "2026-11-01.jsonl"), 29);

    const report = await retention({ retention: { sessionsMs: 30 * DAY, toolHistoryMs: 3 * DAY, auditMs: 60 * DAY } }).prune();

    expect(report).toEqual({ sessions: 1, toolHistory: 2, audit: 1, spend: 1, journals: 0, failed: 0 });
    expect(await list(join(stateDir, "spend"))).toEqual(["2026-11-01.jsonl"]);
    expect(await list(join(stateDir, "sessions"))).toEqual(["cron+report+20261120T090000Z-bbbb.jsonl"]);
    expect(await list(join(stateDir, "tool-history"))).toEqual([]);
    expect(await list(logsDir)).toEqual(["audit-2026-11-01.jsonl"]);
    expect(lines).toMatchObject([
      { level: "info", msg: "removed files older than their retention period", fields: { component: "retention", removed: 5 } },
    ]);
  });

  it("keeps the files of sessions in use whatever their age: running runs and shared jobs", async () => {
    const shared = "cron:digest";
    const running = "cron:slow:20261001T090000Z-dddd";
    await file(session(shared), 400);
    await file(toolHistory(shared), 400);
    await file(toolHistory(running), 45);

    const report = await retention({ inUse: [shared, running] }).prune();

    expect(report).toMatchObject({ sessions: 0, toolHistory: 0 });
    expect(await list(join(stateDir, "sessions"))).toEqual(["cron+digest.jsonl"]);
    expect(await list(join(stateDir, "tool-history"))).toEqual(["cron+digest.jsonl", "cron+slow+20261001T090000Z-dddd.jsonl"]);
  });

  it("keeps today's audit and spend files, which are being written, even when their period is shorter than a day", async () => {
    const today = `audit-${localDate(NOW)}.jsonl`;
    const todaysSpend = `${NOW.toISOString().slice(0, 10)}.jsonl`;
    await mkdir(join(stateDir, "spend"));
    await file(join(logsDir, today), 0.5);
    await file(join(logsDir, "audit-2020-01-01.jsonl"), 0.5);
    await file(join(stateDir, "spend", todaysSpend), 0.5);
    await file(join(stateDir, "spend", "2020-01-01.jsonl"), 0.5);

    await retention({ retention: { ...THIRTY_DAYS, auditMs: 3_600_000 } }).prune();

    expect(await list(logsDir)).toEqual([today]);
    expect(await list(join(stateDir, "spend"))).toEqual([todaysSpend]);
  });

  it("leaves alone what countd did not name: other files, folders, and symlinks", async () => {
    await file(join(stateDir, "sessions", "notes.txt"), 100);
    await file(join(stateDir, "sessions", "100%.jsonl"), 100);
    await mkdir(join(stateDir, "sessions", "kept.jsonl"));
    await file(join(logsDir, "countd.log"), 100);
    await file(join(logsDir, "audit-notes.jsonl"), 100);
    await file(join(root, "outside.jsonl"), 100);
    await symlink(join(root, "outside.jsonl"), join(stateDir, "tool-history", "link.jsonl"));

    const report = await retention({ retention: { sessionsMs: 1, toolHistoryMs: 1, auditMs: 1 } }).prune();

    expect(report).toEqual({ sessions: 0, toolHistory: 0, audit: 0, spend: 0, journals: 0, failed: 0 });
    expect(await list(join(stateDir, "sessions"))).toEqual(["100%.jsonl", "kept.jsonl", "notes.txt"]);
    expect(await list(join(stateDir, "tool-history"))).toEqual(["link.jsonl"]);
    expect(await list(logsDir)).toEqual(["audit-notes.jsonl", "countd.log"]);
    expect(await list(root)).toContain("outside.jsonl");
  });

  it("does nothing when the folders do not exist yet", async () => {
    stateDir = join(root, "fresh-state");
    logsDir = join(root, "fresh-logs");
    expect(await retention().prune()).toEqual({ sessions: 0, toolHistory: 0, audit: 0, spend: 0, journals: 0, failed: 0 });
    expect(lines).toEqual([]);
  });

  it("lets timers and I/O run while it prunes thousands of files", async () => {
    const count = 3_000;
    for (let i = 0; i < count; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => file(session(`cron:tick:${i + j}`), 40)));
    }
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    let ticksWhenDone = -1;
    const pass = retention()
      .prune()
      .then((report) => ((ticksWhenDone = ticks), report));
    const report = await pass;
    clearInterval(timer);

    expect(report.sessions).toBe(count);
    // A pass that held the thread (readdirSync, statSync in one loop) would end before any tick.
    expect(ticksWhenDone).toBeGreaterThan(0);
    expect(await list(join(stateDir, "sessions"))).toEqual([]);
  });

  it("stops between files when asked, leaving the rest for a later pass", async () => {
    for (let i = 0; i < 500; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => file(session(`cron:tick:${i + j}`), 40)));
    }
    const pruner = retention();
    const pass = pruner.prune();
    await pruner.stop();
    const { sessions } = await pass;

    expect(sessions).toBeLessThan(500);
    expect(await readdir(join(stateDir, "sessions"))).toHaveLength(500 - sessions);
  });
});
