import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { spawnDaemon, type DaemonProcess, logLines } from "../support/daemon-process.js";

describe("reload feedback", () => {
  let dir: string;
  let daemon: DaemonProcess | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-reload-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
  });

  const started = async () => {
    daemon = spawnDaemon(dir, { OPENAI_API_KEY: "sk-reload-test" });
    await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), { timeout: 10_000 });
    return daemon;
  };

  it("logs the problems of an invalid countd.yaml on SIGHUP at file:line:col, without a stack trace", async () => {
    const running = await started();
    await writeFile(join(dir, "countd.yaml"), "runner:\n  concurrency: many\n  grace: 1s\n");
    running.child.kill("SIGHUP");
    await vi.waitFor(() => expect(running.output()).toContain("configuration not reloaded; the previous one stays in force"), {
      timeout: 10_000,
    });
    const lines = running
      .output()
      .split("\n")
      .filter((line) => line.includes('"level":50'));
    const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages).toEqual([
      'countd.yaml:2:16: runner.concurrency: expected a positive integer, got "many"',
      "countd.yaml:3:3: runner.grace: unknown key",
      "configuration not reloaded; the previous one stays in force",
    ]);
    expect(running.output()).not.toMatch(/"stack"|ConfigError|\n\s+at /);
  });

  it("logs that a job file is valid again", async () => {
    await writeFile(join(dir, "jobs", "report.yaml"), "prompt: report\n");
    const running = await started();
    await writeFile(join(dir, "jobs", "report.yaml"), "prompt: report\nevery: often\n");
    await vi.waitFor(
      () =>
        expect(logLines(running.output(), "job keeps running its last good version until the file is fixed")).toContainEqual(
          expect.objectContaining({ component: "jobs", job: "report" }),
        ),
      { timeout: 10_000 },
    );
    await writeFile(join(dir, "jobs", "report.yaml"), "prompt: report, fixed\n");
    await vi.waitFor(
      () =>
        expect(logLines(running.output(), "job file valid again; the job runs as the file now says")).toContainEqual(
          expect.objectContaining({ component: "jobs", job: "report", file: expect.stringMatching(/jobs\/report\.yaml$/) }),
        ),
      { timeout: 10_000 },
    );
  });
});
