import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, spawnCountd, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { logLines, runCountd } from "../support/daemon-process.js";

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd run beside a running daemon", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  async function setup(jobs: Record<string, string>) {
    const dir = await countdFolder(jobs);
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    return { dir, env, countd: countdIn(dir, env) };
  }

  const history = async (countd: ReturnType<typeof countdIn>, job: string) =>
    JSON.parse((await countd(["history", job, "--json"])).stdout) as RunRecord[];

  it("runs the job inside the daemon: its answer on stdout, its tool calls on stderr, recorded with reason manual", async () => {
    mock.on(
      { userMessage: "weekly numbers", sequenceIndex: 0 },
      { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] },
    );
    mock.on({ userMessage: "weekly numbers", sequenceIndex: 1 }, { content: "Revenue is up 4 %." }, { chunkSize: 3 });
    const { countd } = await setup({ weekly: "prompt: Report the weekly numbers.\ntools: [list_dir]\n" });

    const run = await countd(["run", "weekly"]);
    expect(run).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
    const [record] = await history(countd, "weekly");
    expect(run.stderr.split("\n").filter((line) => !line.startsWith("countd: warning: "))).toEqual([
      expect.stringMatching(/^\[tool\] list_dir \{"path":"\."\} ok \d+ms$/),
      `countd: run ${record!.id} ok`,
      "",
    ]);

    expect(record).toMatchObject({ reason: "manual", status: "ok", toolCalls: 1, resultExcerpt: "Revenue is up 4 %." });
    // The daemon ran it: its log has the run, and the command did not take the state lock from it.
    expect(logLines(daemon!.output(), "run started")).toEqual([
      expect.objectContaining({ job: "weekly", runId: record!.id, reason: "manual" }),
    ]);
    expect(daemon!.child.exitCode).toBeNull();
  });

  it("returns once the run's deliveries had their first attempt, as a local run does: the mail is written, a webhook that failed is said to be retried", async () => {
    mock.onMessage("weekly numbers", { content: "Revenue is up 4 %." });
    const { dir, countd } = await setup({
      weekly:
        "prompt: Report the weekly numbers.\ndeliver:\n  - email: { to: [boss@example.com] }\n  - webhook: { url: 'http://127.0.0.1:9/hook' }\n",
    });
    const run = await countd(["run", "weekly"]);
    expect(run).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
    expect(run.stderr).toContain("countd: some deliveries are pending; the daemon retries them (see countd outbox)\n");
    const [record] = await history(countd, "weekly");
    const mail = await readdir(join(dir, "state", "mail"));
    expect(mail).toEqual([expect.stringMatching(new RegExp(`^weekly\\.${record!.id}\\.`))]);
  });

  it("says on stderr which run it was and what became of each delivery, as a local run does", async () => {
    mock.onMessage("weekly numbers", { content: "Revenue is up 4 %." });
    const { countd } = await setup({
      weekly:
        "prompt: Report the weekly numbers.\ndeliver:\n  - email: { to: [boss@example.com] }\n  - webhook: { url: 'http://127.0.0.1:9/hook' }\n",
    });
    const run = await countd(["run", "weekly"]);
    expect(run).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
    const [record] = await history(countd, "weekly");
    const lines = run.stderr.split("\n").filter((line) => !line.startsWith("countd: warning: "));
    expect(lines.slice(0, 2)).toEqual([
      `countd: run ${record!.id} ok`,
      expect.stringMatching(
        /^countd: deliveries: delivered: email to boss@example\.com · queued: json webhook at http:\/\/127\.0\.0\.1:9\/hook \(.+\)$/,
      ),
    ]);
  });

  it("Ctrl-C cancels the run in the daemon: exit 130, the answer so far on stdout, recorded cancelled", async () => {
    const answer = "one two three four five six seven eight nine ten eleven twelve";
    mock.onMessage("long report", { content: answer }, { latency: 100 });
    const { dir, env, countd } = await setup({ long: "prompt: long report\n" });
    let interrupted = false;
    const run = await runCountd(["run", "long"], {
      cwd: dir,
      env,
      onStdout: (_text, interrupt) => {
        if (!interrupted) {
          interrupted = true;
          interrupt();
        }
      },
    });
    expect(run.code).toBe(130);
    expect(answer.startsWith(run.stdout.trimEnd())).toBe(true);
    expect(run.stdout.trimEnd().length).toBeLessThan(answer.length);
    const [record] = await history(countd, "long");
    expect(record).toMatchObject({ reason: "manual", status: "cancelled", error: "cancelled by the user (Ctrl-C)" });
    expect(run.stderr).toMatch(new RegExp(`^countd: run ${record!.id} cancelled: `, "m"));
  });

  it("a run the job's overlap policy skips says so and exits 1; an unknown job and an invalid job file are named", async () => {
    mock.onMessage("slow report", { content: "Finally." }, { latency: 60_000 });
    const { dir, env, countd } = await setup({ slow: "prompt: slow report\n", broken: "prompt: broken\ntimeout: soon\n" });
    const first = spawnCountd(dir, env, ["run", "slow"]);
    await vi.waitFor(async () => expect((JSON.parse((await countd(["status", "--json"])).stdout) as StatusView).running).toHaveLength(1), {
      timeout: 15_000,
      interval: 200,
    });

    const second = await countd(["run", "slow"]);
    expect(second.code).toBe(1);
    expect(second.stdout).toBe("");
    expect(second.stderr).toMatch(/^countd: run \S+ skipped: /m);

    const unknown = await countd(["run", "nope"]);
    expect(unknown).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('countd: no job named "nope" in jobs (jobs: slow); 1 job file is invalid: jobs/broken.yaml'),
    });
    const invalid = await countd(["run", "broken"]);
    expect(invalid).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^countd: jobs\/broken\.yaml is invalid:\njobs\/broken\.yaml:2:10: timeout: /m),
    });
    first.child.kill("SIGINT");
    expect(await first.closed).toBe(130);
  });
});
