import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver } from "../support/webhook-receiver.js";

describe("countd start", () => {
  const mock = useAimock();
  let dir: string;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-daemon-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    env = { PATH: process.env["PATH"] ?? "", OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-daemon-test-key" };
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
  });

  function startDaemon(): DaemonProcess {
    const daemon = spawnDaemon(dir, env);
    daemons.push(daemon);
    return daemon;
  }

  async function runs(): Promise<RunRecord[]> {
    return (await StateStore.open(join(dir, "state"))).allRuns();
  }

  it("fires a cron job with seconds, records each run with its tokens, and stops on SIGTERM", async () => {
    mock.onMessage("tick", { content: "tock", usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } });
    await writeFile(join(dir, "jobs", "ticker.yaml"), 'schedule: "* * * * * *"\nprompt: tick\n');
    const daemon = startDaemon();
    await vi.waitFor(async () => expect((await runs()).filter((r) => r.status === "ok").length).toBeGreaterThanOrEqual(2), {
      timeout: 10_000,
      interval: 200,
    });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
    const done = (await runs()).filter((r) => r.status === "ok");
    expect(done[0]).toMatchObject({
      job: "ticker",
      reason: "schedule",
      resultExcerpt: "tock",
      usage: { inputTokens: 11, outputTokens: 2 },
    });
    expect(done[0]!.sessionId).toBe(`cron:ticker:${done[0]!.id}`);
  });

  it("refuses a second daemon on the same state directory with a clear message", async () => {
    const first = startDaemon();
    await vi.waitFor(() => expect(first.output()).toContain("countd started"), { timeout: 10_000 });
    const second = startDaemon();
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(new RegExp(`countd: another countd \\(pid ${first.child.pid}\\) is already running`));
  });

  it("reloads the configuration on SIGHUP, and keeps the running one when the new file is invalid", async () => {
    const daemon = startDaemon();
    await vi.waitFor(() => expect(daemon.output()).toContain("countd started"), { timeout: 10_000 });
    daemon.child.kill("SIGHUP");
    await vi.waitFor(() => expect(daemon.output()).toContain("configuration reloaded"), { timeout: 10_000 });
    await writeFile(join(dir, "countd.yaml"), "runner:\n  concurrency: many\n");
    daemon.child.kill("SIGHUP");
    await vi.waitFor(() => expect(daemon.output()).toContain("configuration not reloaded; the previous one stays in force"), {
      timeout: 10_000,
    });
    expect(daemon.output()).toContain("countd.yaml:2:16: runner.concurrency");
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
  });

  it("gives running jobs the grace period on SIGTERM, then cancels them", async () => {
    mock.onMessage("slow", { content: "this answer takes a long time to stream out completely" }, { latency: 400 });
    await writeFile(join(dir, "jobs", "slow.yaml"), 'schedule: "* * * * * *"\nprompt: slow\noverlap: skip\n');
    const daemon = startDaemon();
    await vi.waitFor(async () => expect((await runs()).some((r) => r.status === "running")).toBe(true), { timeout: 10_000, interval: 100 });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
    const slow = (await runs()).filter((r) => r.job === "slow" && r.status !== "skipped");
    expect(slow.at(-1)).toMatchObject({ status: "cancelled", error: expect.stringContaining("grace period") });
    expect(slow.some((r) => r.status === "running")).toBe(false);
  });

  it("marks a run cut short by a crash as interrupted at the next start and reports it to on_failure", async () => {
    const receiver = await startWebhookReceiver();
    try {
      mock.onMessage("slow", { content: "this answer takes a long time to stream out completely" }, { latency: 400 });
      const failureTarget = `on_failure:\n  - webhook: { url: "${receiver.url}" }\n`;
      await writeFile(join(dir, "jobs", "slow.yaml"), `schedule: "* * * * * *"\nprompt: slow\noverlap: skip\n${failureTarget}`);
      const crashed = startDaemon();
      await vi.waitFor(async () => expect((await runs()).some((r) => r.status === "running")).toBe(true), {
        timeout: 10_000,
        interval: 100,
      });
      crashed.child.kill("SIGKILL");
      await crashed.exited;
      await writeFile(join(dir, "jobs", "slow.yaml"), `enabled: false\nprompt: slow\n${failureTarget}`);
      const restarted = startDaemon();
      await vi.waitFor(() => expect(restarted.output()).toContain("countd started"), { timeout: 10_000 });
      const interrupted = (await runs()).find((r) => r.status === "interrupted");
      expect(interrupted).toMatchObject({ job: "slow", error: "countd stopped while this run was in progress" });
      expect(restarted.output()).toContain("marked interrupted");
      await receiver.waitFor(1);
      expect(JSON.parse(receiver.requests[0]!.body)).toMatchObject({
        type: "run.failed",
        job: "slow",
        run: { id: interrupted!.id, status: "interrupted" },
      });
    } finally {
      await receiver.close();
    }
  });
});
