import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess, logLines } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/** A daemon that failed to start must be gone soon after, not merely have said so. */
const EXIT_WITHIN_MS = 15_000;

const MOVED_ASIDE = "a piece of a state file does not fit; moved aside to the quarantine file and skipped";

describe("countd start with state files of the wrong shape", () => {
  const mock = useAimock();
  let dir: string;
  let state: string;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-shapes-"));
    state = join(dir, "state");
    await mkdir(join(dir, "jobs"));
    await mkdir(state);
    receiver = await startWebhookReceiver();
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-shapes-test-key" };
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    mock.onMessage("tick", { content: "tock" });
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
    await receiver.close();
  });

  function start(): DaemonProcess {
    const daemon = spawnDaemon(dir, env);
    daemons.push(daemon);
    return daemon;
  }

  /** Ends within EXIT_WITHIN_MS with this code; a process kept alive by half its start-up fails here. */
  async function exitCode(daemon: DaemonProcess): Promise<number | null> {
    const timer = setTimeout(() => daemon.child.kill("SIGKILL"), EXIT_WITHIN_MS);
    try {
      return await daemon.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  const quarantined = async () =>
    (await readFile(join(state, "quarantine.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { file: string; where: string; value: unknown });

  it("delivers the answers of 8 runs with a malformed outbox entry present, moves the entry aside, and stops on SIGTERM", async () => {
    await writeFile(join(state, "outbox.jsonl"), `${JSON.stringify({ op: "queued", entry: null })}\n`);
    await writeFile(
      join(dir, "jobs", "ticker.yaml"),
      `schedule: "* * * * * *"\nprompt: tick\ndeliver:\n  - webhook: { url: "${receiver.url}" }\n`,
    );
    const daemon = start();
    await receiver.waitFor(8);
    daemon.child.kill("SIGTERM");
    expect(await exitCode(daemon), daemon.output()).toBe(0);

    const delivered = new Set(receiver.requests.map((request) => (JSON.parse(request.body) as { run: { id: string } }).run.id));
    const ok = (await allRuns(state)).filter((run) => run.status === "ok").map((run) => run.id);
    expect(ok.length).toBeGreaterThanOrEqual(8);
    // A run stopped by SIGTERM after its answer was queued is delivered at the next start.
    expect(ok.filter((id) => !delivered.has(id)).length).toBeLessThanOrEqual(1);
    expect(daemon.output()).not.toContain("could not queue");
    expect(logLines(daemon.output(), MOVED_ASIDE)).toContainEqual(
      expect.objectContaining({
        file: join(state, "outbox.jsonl"),
        where: "line 1",
        problem: expect.stringMatching(/^is no outbox record/),
      }),
    );
    expect(await quarantined()).toEqual([
      expect.objectContaining({ file: join(state, "outbox.jsonl"), where: "line 1", value: { op: "queued", entry: null } }),
    ]);
  }, 60_000);

  it("starts with each wrong shape of state.json moved aside, fires its jobs, and stops on SIGTERM", async () => {
    await writeFile(join(dir, "jobs", "ticker.yaml"), 'schedule: "* * * * * *"\nprompt: tick\n');
    const shapes: Array<[unknown, string, unknown]> = [
      [{ jobs: null }, "jobs", null],
      ["str", "the whole file", "str"],
      [[1, 2, 3], "the whole file", [1, 2, 3]],
      [
        { jobs: { ticker: { lastScheduledAt: 7 }, "@heartbeat": { checkIns: [] } }, running: { "x/1": "y" } },
        "jobs.ticker",
        { lastScheduledAt: 7 },
      ],
    ];
    for (const [shape, where, value] of shapes) {
      await writeFile(join(state, "state.json"), JSON.stringify(shape));
      await writeFile(join(state, "quarantine.jsonl"), "");
      const daemon = start();
      await vi.waitFor(() => expect(daemon.output()).toContain('"msg":"run finished"'), { timeout: 15_000, interval: 100 });
      daemon.child.kill("SIGTERM");
      expect(await exitCode(daemon), daemon.output()).toBe(0);
      expect(logLines(daemon.output(), MOVED_ASIDE), JSON.stringify(shape)).toContainEqual(
        expect.objectContaining({ file: join(state, "state.json"), where, problem: expect.stringMatching(/^does not fit/) }),
      );
      expect(await quarantined()).toContainEqual(expect.objectContaining({ file: join(state, "state.json"), where, value }));
      const written = JSON.parse(await readFile(join(state, "state.json"), "utf8")) as Record<string, unknown>;
      expect(Object.keys(written).sort()).toEqual(["jobs", "running"]);
    }
  }, 120_000);

  it("exits, naming the file and the problem, on every start-up failure", async () => {
    await writeFile(join(dir, "jobs", "ticker.yaml"), 'schedule: "* * * * * *"\nprompt: tick\n');
    const failures: Array<[() => Promise<void>, string]> = [
      [() => writeFile(join(state, "state.json"), '{"jobs": {'), `the state file ${join(state, "state.json")} is not valid JSON`],
      [() => mkdir(join(state, "outbox.jsonl")), `cannot read ${join(state, "outbox.jsonl")}: EISDIR`],
    ];
    for (const [cause, message] of failures) {
      await cause();
      const daemon = start();
      const code = await exitCode(daemon);
      expect(daemon.output()).toContain(message);
      expect(code, daemon.output()).toBe(1);
      await rm(state, { recursive: true });
      await mkdir(state);
    }
  }, 120_000);

  // A 30-day heartbeat once stopped the start (its own timer could not wait that long); as a job its schedule can.
  it("starts with a heartbeat every 30 days and stops on SIGTERM", async () => {
    await writeFile(
      join(dir, "countd.yaml"),
      `runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\nheartbeat:\n  enabled: true\n  every: 30d\n  deliver:\n    - webhook: { url: "${receiver.url}" }\n`,
    );
    const daemon = start();
    await vi.waitFor(() => expect(daemon.output()).toContain("countd started"), { timeout: 15_000 });
    daemon.child.kill("SIGTERM");
    expect(await exitCode(daemon), daemon.output()).toBe(0);
  }, 60_000);
});
