import { afterEach, describe, expect, it, vi } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import { chunk, startSseServer } from "../support/sse-server.js";
import {
  countdFolder,
  countdIn,
  llmEnv,
  spawnCountd,
  startDaemon,
  stopDaemon,
  type CountdProcess,
  type DaemonProcess,
} from "../support/cli-daemon.js";

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd follow", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  const followers: CountdProcess[] = [];
  afterEach(async () => {
    followers.splice(0).forEach((follower) => follower.child.kill("SIGKILL"));
    await stopDaemon(daemon);
    daemon = undefined;
  });

  async function follow(dir: string, env: Record<string, string>, args: string[]): Promise<CountdProcess> {
    const follower = spawnCountd(dir, env, ["follow", ...args]);
    followers.push(follower);
    await vi.waitFor(() => expect(follower.stderr()).toContain("countd: following "), { timeout: 15_000, interval: 50 });
    return follower;
  }

  it("prints every run's start, tool calls, answer lines, end and deliveries, each led by its job, until Ctrl-C", async () => {
    mock.on(
      { userMessage: "weekly numbers", sequenceIndex: 0 },
      { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] },
    );
    mock.on({ userMessage: "weekly numbers", sequenceIndex: 1 }, { content: "Revenue is up 4 %.\nCosts are flat." }, { chunkSize: 4 });
    mock.onMessage("other job", { content: "Other answer." });
    const dir = await countdFolder({
      weekly: "prompt: Report the weekly numbers.\ntools: [list_dir]\ndeliver:\n  - email: { to: [boss@example.com] }\n",
      other: "prompt: other job\n",
    });
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    const all = await follow(dir, env, []);
    const otherOnly = await follow(dir, env, ["other"]);

    expect((await countd(["run", "weekly"])).code).toBe(0);
    await vi.waitFor(() => expect(all.stdout()).toMatch(/^\[weekly\] delivery delivered: email to boss@example\.com \(attempt 1\)$/m), {
      timeout: 15_000,
      interval: 100,
    });
    const id = /^\[weekly\] run (\S+) started \(manual\)$/m.exec(all.stdout())?.[1];
    expect(id).toBeDefined();
    const lines = all.stdout().split("\n").filter(Boolean);
    const deliveries = lines.filter((line) => line.startsWith("[weekly] delivery "));
    expect(lines.filter((line) => !deliveries.includes(line))).toEqual([
      `[weekly] run ${id} started (manual)`,
      expect.stringMatching(/^\[weekly\] \[tool\] list_dir \{"path":"\."\} ok \d+ms$/),
      "[weekly] Revenue is up 4 %.",
      "[weekly] Costs are flat.",
      expect.stringMatching(
        new RegExp(`^\\[weekly\\] run ${id} ok \\(\\S+, tokens \\d+ in .*/ \\d+ out, (\\$\\d+\\.\\d{4}|<\\$0\\.0001)\\)$`),
      ),
    ]);
    // Queued before the run's end is recorded, sent after.
    expect(deliveries).toEqual([
      "[weekly] delivery queued: email to boss@example.com",
      "[weekly] delivery sending: email to boss@example.com (attempt 1)",
      "[weekly] delivery delivered: email to boss@example.com (attempt 1)",
    ]);
    expect(otherOnly.stdout()).toBe("");

    expect((await countd(["run", "other"])).code).toBe(0);
    await vi.waitFor(() => expect(otherOnly.stdout()).toMatch(/^\[other\] run \S+ ok /m), { timeout: 15_000, interval: 100 });
    expect(otherOnly.stdout()).toContain("\n[other] Other answer.\n");
    expect(otherOnly.stdout()).not.toContain("[weekly]");

    all.child.kill("SIGINT");
    expect(await all.closed).toBe(0);
  });

  it("refuses a job that does not exist, naming it and the jobs there are, as countd run does (exit 1)", async () => {
    const dir = await countdFolder({ weekly: "prompt: Report the weekly numbers.\n" });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    const followed = await countdIn(dir, env)(["follow", "nosuch"]);
    expect(followed).toMatchObject({ code: 1, stdout: "", stderr: 'countd: no job named "nosuch" (jobs: weekly)\n' });
  });

  it("joining mid-run shows that run from its start; the daemon stopping ends the command with exit 3", async () => {
    // The answer stops after its first words until the run is cancelled: the follower joins mid-run whatever its start-up takes.
    const llm = await startSseServer([{ events: [chunk({ role: "assistant", content: "one two " })], after: "stall" }]);
    try {
      const dir = await countdFolder({ slow: "prompt: slow report\n" });
      const env = llmEnv(llm.baseURL);
      const countd = countdIn(dir, env);
      daemon = await startDaemon(dir, env);
      const run = spawnCountd(dir, env, ["run", "slow"]);
      await vi.waitFor(() => expect(run.stdout()).toBe("one two "), { timeout: 15_000, interval: 50 });
      const [active] = (JSON.parse((await countd(["status", "--json"])).stdout) as StatusView).running;

      const follower = await follow(dir, env, ["slow"]);
      await vi.waitFor(() => expect(follower.stdout()).toBe(`[slow] run ${active!.id} started (manual)\n[slow] one two `), {
        timeout: 5_000,
        interval: 50,
      });
      expect(await countd(["cancel", active!.id])).toMatchObject({ code: 0 });
      await vi.waitFor(() => expect(follower.stdout()).toMatch(/\n\[slow\] run \S+ cancelled /), { timeout: 15_000, interval: 50 });
      expect(follower.stdout()).toMatch(
        new RegExp(`^\\[slow\\] run ${active!.id} started \\(manual\\)\\n\\[slow\\] one two \\n\\[slow\\] run ${active!.id} cancelled \\(`),
      );
      expect(await run.closed).toBe(130);

      await stopDaemon(daemon);
      daemon = undefined;
      expect(await follower.closed).toBe(3);
      expect(follower.stderr()).toContain("countd: the daemon closed the stream (countd is stopping)");
    } finally {
      await llm.close();
    }
  });
});
