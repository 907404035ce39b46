import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { addJob, nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { startDaemon } from "../support/cli-daemon.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Three daemons, each a `countd start` process in a folder of its own, share one real redis-server.
 * A one-shot job's run is held at the loopback LLM; the daemon running it is killed with SIGKILL.
 * What is checked is what a user sees: the run records `countd history` lists, and the Standard
 * Webhooks messages a receiver got (each webhook-id once). No timing is asserted: another daemon
 * notices the dead one's run once its hold in Redis expired, within one and a half holds of the
 * kill; the daemons here hold a fire HOLD (cluster.hold), not the 20 s of the default.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SLOW = { timeout: 120_000, interval: 500 };
/** The daemons' cluster.hold: renewed every 2 s, so a loaded machine's stalls do not lose it. */
const HOLD = "4s";
/** How long nothing more may happen after the outcome: past a restarted node's start and another hold's stalled checks. */
const QUIET_MS = 6_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Message {
  id: string;
  type: string;
  runId: string;
  status: string;
  failure: boolean;
}

describe.skipIf(!hasRedis)("a daemon killed mid-run, of three on one Redis", { timeout: 300_000 }, () => {
  const cluster = useCluster({ env: { HOOK_SECRET: SECRET } });
  const { mock } = cluster;
  let hooks: WebhookReceiver;
  /** Lets the held LLM call answer, so the mock server can stop. */
  let release = () => {};

  beforeAll(async () => {
    hooks = await startWebhookReceiver({ secret: SECRET });
  });
  afterAll(async () => {
    await hooks?.close();
  });
  afterEach(async (context) => {
    // What the daemons said, for a failure on a machine where it cannot be watched.
    if (context.task.result?.state === "fail")
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-6_000)}\n`);
    release();
    await cluster.stopDaemons();
  });

  const history = (dir: string, job: string) => nodeHistory(dir, job, cluster.env);

  /** The messages about `job` the receiver took, each verified. */
  function messages(job: string): Message[] {
    return hooks.requests
      .filter((request) => new URL(request.url, hooks.url).searchParams.get("job") === job)
      .map((request) => {
        expect(request.verified).toBe(true);
        expect(request.status).toBe(200);
        const body = JSON.parse(request.body) as { type: string; run: { id: string; status: string } };
        const failure = new URL(request.url, hooks.url).searchParams.get("to") === "on_failure";
        return { id: String(request.headers["webhook-id"]), type: body.type, runId: body.run.id, status: body.run.status, failure };
      });
  }

  /**
   * Three daemons with one `at` job whose first LLM call is held (later ones answer at once); the
   * daemon that runs it is killed mid-run. Returns the nodes' folders, the killed node and its run.
   */
  async function killMidRun(job: string, attempts: number): Promise<{ dirs: string[]; killed: number; run: RunRecord }> {
    let calls = 0;
    const held = new Promise<void>((resolve) => (release = resolve));
    mock.onMessage(`hold ${job}`, async () => {
      if (++calls === 1) await held;
      return { content: `the report of ${job}` };
    });
    const target = (to: string) => [`  - webhook:`, `      url: ${hooks.url}?job=${job}&to=${to}`, "      secret: ${HOOK_SECRET}"];
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, {}, ["job_env: [HOOK_SECRET]"], { hold: HOLD })),
    );
    await startNodes(dirs, cluster.env, cluster.daemons);
    // Added once all three run, due a few seconds later (`at:` takes whole seconds).
    const at = new Date(Math.ceil((Date.now() + 5_000) / 1_000) * 1_000).toISOString().replace(".000Z", "Z");
    const text = [
      `at: "${at}"`,
      `prompt: hold ${job}`,
      "retry:",
      `  attempts: ${attempts}`,
      "  backoff: 1s",
      "deliver:",
      ...target("deliver"),
      "on_failure:",
      ...target("on_failure"),
      "",
    ];
    await addJob(dirs, cluster.daemons, job, text.join("\n"));

    // The held call arrived (no process spawned to see it), then its run is listed running.
    await vi.waitFor(() => expect(calls).toBe(1), { timeout: SLOW.timeout, interval: 50 });
    let run: RunRecord | undefined;
    await vi.waitFor(async () => {
      run = (await history(dirs[0]!, job)).find((record) => record.status === "running");
      expect(run).toBeDefined();
      expect(calls).toBe(1);
    }, SLOW);
    const killed = NODES.indexOf(run!.node!);
    expect(killed).toBeGreaterThanOrEqual(0);
    cluster.daemons[killed]!.child.kill("SIGKILL");
    await cluster.daemons[killed]!.exited;
    return { dirs, killed, run: run! };
  }

  /** The killed node started again on its folder: it finds its run already recorded, and adds nothing. */
  async function restart(dirs: string[], killed: number): Promise<void> {
    cluster.daemons[killed] = await startDaemon(dirs[killed]!, cluster.env);
    await sleep(QUIET_MS);
  }

  it("with retry.attempts 2: records the run interrupted with its node, runs it again once on another node (reason retry, attempt 2), and delivers its report once", async () => {
    const job = "retried";
    const { dirs, killed, run } = await killMidRun(job, 2);
    const other = dirs[(killed + 1) % dirs.length]!;

    let rerun: RunRecord | undefined;
    await vi.waitFor(async () => {
      const runs = await history(other, job);
      expect(runs.find((record) => record.id === run.id)).toMatchObject({
        status: "interrupted",
        node: NODES[killed],
        attempt: 1,
        error: `node ${NODES[killed]} stopped while this run was in progress`,
      });
      rerun = runs.find((record) => record.id !== run.id);
      expect(rerun).toMatchObject({ status: "ok", reason: "retry", attempt: 2 });
    }, SLOW);
    expect(rerun!.node).not.toBe(NODES[killed]);
    await vi.waitFor(() => expect(messages(job)).toHaveLength(1), SLOW);

    await restart(dirs, killed);
    for (const dir of dirs)
      expect((await history(dir, job)).map((record) => [record.id, record.status])).toEqual([
        [run.id, "interrupted"],
        [rerun!.id, "ok"],
      ]);
    const got = messages(job);
    expect(got).toEqual([{ id: expect.any(String), type: "run.completed", runId: rerun!.id, status: "ok", failure: false }]);
    expect(new Set(hooks.acknowledgedIds()).size).toBe(hooks.acknowledgedIds().length);
    process.stderr.write(
      `cluster kill: ${NODES[killed]} killed mid-run, ${rerun!.node} ran it again (attempt 2), ${got.length} delivery\n`,
    );
  });

  it("with retry.attempts 1: records the run interrupted with its node, does not run it again, and reports it to on_failure once", async () => {
    const job = "single";
    const { dirs, killed, run } = await killMidRun(job, 1);
    const other = dirs[(killed + 1) % dirs.length]!;

    await vi.waitFor(async () => {
      expect(await history(other, job)).toEqual([
        expect.objectContaining({
          id: run.id,
          status: "interrupted",
          node: NODES[killed],
          attempt: 1,
          error: `node ${NODES[killed]} stopped while this run was in progress`,
        }),
      ]);
    }, SLOW);
    await vi.waitFor(() => expect(messages(job)).toHaveLength(1), SLOW);

    await restart(dirs, killed);
    for (const dir of dirs)
      expect((await history(dir, job)).map((record) => [record.id, record.status])).toEqual([[run.id, "interrupted"]]);
    expect(messages(job)).toEqual([{ id: expect.any(String), type: "run.failed", runId: run.id, status: "interrupted", failure: true }]);
    expect(new Set(hooks.acknowledgedIds()).size).toBe(hooks.acknowledgedIds().length);
    process.stderr.write(`cluster kill: ${NODES[killed]} killed mid-run, not run again (attempts 1), reported to on_failure once\n`);
  });
});
