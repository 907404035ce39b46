import { mkdir, mkdtemp, readdir, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { spawnDaemon, type DaemonProcess, logLines } from "../support/daemon-process.js";

const DAY = 24 * 3_600_000;

async function written(path: string, daysAgo: number): Promise<void> {
  await writeFile(path, '{"role":"user","content":"hi"}\n');
  const at = new Date(Date.now() - daysAgo * DAY);
  await utimes(path, at, at);
}

describe("countd start: retention", () => {
  const daemons: DaemonProcess[] = [];
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
  });

  it("prunes old transcripts, tool history and audit files at start, keeping a shared job's conversation", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-retention-daemon-"));
    const sessions = join(dir, "state", "sessions");
    const toolHistory = join(dir, "state", "tool-history");
    const logs = join(dir, "logs");
    await Promise.all([join(dir, "jobs"), sessions, toolHistory, logs].map((d) => mkdir(d, { recursive: true })));
    await writeFile(
      join(dir, "countd.yaml"),
      "retention:\n  sessions: 7d\n  tool_history: 7d\n  audit: 14d\ntools:\n  exec:\n    sandbox: none\n",
    );
    // Fires once a year: the test needs the job's definition, not a run.
    await writeFile(join(dir, "jobs", "digest.yaml"), 'schedule: "0 0 1 1 *"\nsession: shared\nprompt: digest\n');

    await written(join(sessions, "cron+report+20261001T090000Z-aaaa.jsonl"), 10);
    await written(join(sessions, "cron+report+20261002T090000Z-bbbb.jsonl"), 9);
    await written(join(sessions, "cron+report+20261125T090000Z-cccc.jsonl"), 2);
    await written(join(sessions, "cron+digest.jsonl"), 300);
    await written(join(toolHistory, "cron+report+20261001T090000Z-aaaa.jsonl"), 10);
    await written(join(toolHistory, "cron+report+20261126T090000Z-dddd.jsonl"), 1);
    await written(join(logs, "audit-2026-10-01.jsonl"), 20);
    await written(join(logs, "audit-2026-11-25.jsonl"), 10);

    const daemon = spawnDaemon(dir, { OPENAI_API_KEY: "sk-retention-test", OPENAI_BASE_URL: "http://127.0.0.1:9/v1" });
    daemons.push(daemon);
    await vi.waitFor(
      () => {
        expect(logLines(daemon.output(), "removed files older than their retention period")).toEqual([
          expect.objectContaining({ level: 30, component: "retention", removed: 4 }),
        ]);
      },
      { timeout: 10_000, interval: 100 },
    );

    expect((await readdir(sessions)).sort()).toEqual(["cron+digest.jsonl", "cron+report+20261125T090000Z-cccc.jsonl"]);
    expect(await readdir(toolHistory)).toEqual(["cron+report+20261126T090000Z-dddd.jsonl"]);
    expect(await readdir(logs)).toEqual(["audit-2026-11-25.jsonl"]);

    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
  });
});
