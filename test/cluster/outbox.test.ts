import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { OutboxEntry } from "../../src/delivery/outbox.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { addJob, nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { startDaemon } from "../support/cli-daemon.js";
import { logLines, runCountd } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The cluster's outbox, seen from outside: three daemons, each a `countd start` process in a
 * folder of its own, share one real redis-server; a one-shot job's answer goes to a Standard
 * Webhooks receiver that is down (answers 503) for the first attempt. countd's own retry schedule
 * applies (the first retry 30 s ± 15 % after the failure), so the waits are long; no timing is
 * asserted. What is checked: each webhook-id acknowledged once, every attempt under the same
 * webhook-id, `countd outbox` on a node that did not run the job, and which node sent it.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SLOW = { timeout: 120_000, interval: 500 };
/** The daemons' cluster.hold: a delivery a killed node was sending is sent by another within 6 s. */
const HOLD = "4s";
/** How long nothing more may happen after the outcome: past a restarted node's start and another hold's stalled checks. */
const QUIET_MS = 6_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!hasRedis)("the cluster's outbox, on three daemons and one Redis", { timeout: 300_000 }, () => {
  const cluster = useCluster({ env: { HOOK_SECRET: SECRET } });
  const { mock } = cluster;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    hooks = await startWebhookReceiver({ secret: SECRET });
  });
  afterAll(async () => {
    await hooks?.close();
  });
  afterEach(async (context) => {
    if (context.task.result?.state === "fail")
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-6_000)}\n`);
    await cluster.stopDaemons();
  });

  /** The receiver's requests about `job`, each verified. */
  function requests(job: string) {
    return hooks.requests.filter((request) => new URL(request.url, hooks.url).searchParams.get("job") === job);
  }
  const acknowledged = (job: string) => requests(job).filter((request) => request.status === 200);

  /** Which node's log says it delivered `id`. */
  const senders = (id: string) =>
    cluster.daemons.flatMap((daemon, i) =>
      logLines(daemon.output(), "delivered").some((line) => line["delivery"] === id) ? [NODES[i]!] : [],
    );

  /**
   * Three daemons with one `at` job whose answer goes to the receiver, which answers its first
   * request 503; resolves once that attempt failed, with the nodes' folders and the job's run.
   */
  async function failFirstAttempt(job: string): Promise<{ dirs: string[]; run: RunRecord }> {
    mock.onMessage(`report ${job}`, { content: `the report of ${job}` });
    hooks.script(503);
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, {}, ["job_env: [HOOK_SECRET]"], { hold: HOLD })),
    );
    await startNodes(dirs, cluster.env, cluster.daemons);
    // Added once all three run, due a few seconds later (`at:` takes whole seconds).
    const at = new Date(Math.ceil((Date.now() + 5_000) / 1_000) * 1_000).toISOString().replace(".000Z", "Z");
    const text = [
      `at: "${at}"`,
      `prompt: report ${job}`,
      "deliver:",
      "  - webhook:",
      `      url: ${hooks.url}?job=${job}`,
      "      secret: ${HOOK_SECRET}",
      "",
    ];
    await addJob(dirs, cluster.daemons, job, text.join("\n"));
    await vi.waitFor(() => expect(requests(job).map((request) => request.status)).toEqual([503]), SLOW);
    const runs = await nodeHistory(dirs[0]!, job, cluster.env);
    expect(runs).toEqual([expect.objectContaining({ status: "ok" })]);
    return { dirs, run: runs[0]! };
  }

  it("retries a delivery whose receiver was down, on countd's schedule, until it arrives once; `countd outbox` on a node that did not run it lists it meanwhile", async () => {
    const job = "down-then-up";
    const { dirs, run } = await failFirstAttempt(job);
    const other = NODES.findIndex((node) => node !== run.node);

    const listed = await runCountd(["outbox", "--json"], { cwd: dirs[other]!, env: cluster.env });
    expect(listed).toMatchObject({ code: 0, stderr: "" });
    const entries = JSON.parse(listed.stdout) as OutboxEntry[];
    const id = String(requests(job)[0]!.headers["webhook-id"]);
    expect(entries).toEqual([expect.objectContaining({ id, status: "pending", attempts: 1, lastError: expect.stringContaining("503") })]);
    expect(Date.parse(entries[0]!.nextAttemptAt)).toBeGreaterThan(Date.parse(entries[0]!.lastAttemptAt!));

    await vi.waitFor(() => expect(acknowledged(job)).toHaveLength(1), SLOW);
    await sleep(QUIET_MS);
    expect(requests(job).map((request) => [request.headers["webhook-id"], request.status, request.verified])).toEqual([
      [id, 503, true],
      [id, 200, true],
    ]);
    expect(JSON.parse((await runCountd(["outbox", "--json"], { cwd: dirs[other]!, env: cluster.env })).stdout)).toEqual([]);
    expect(senders(id)).toHaveLength(1);
    process.stderr.write(`cluster outbox: ${run.node} ran ${job}; ${senders(id)[0]} delivered it on the retry\n`);
  });

  it("delivers once, from another node, what a node killed with SIGKILL had queued while the receiver was down", async () => {
    const job = "killed-sender";
    const { dirs, run } = await failFirstAttempt(job);
    const killed = NODES.indexOf(run.node!);
    expect(killed).toBeGreaterThanOrEqual(0);
    cluster.daemons[killed]!.child.kill("SIGKILL");
    await cluster.daemons[killed]!.exited;
    const id = String(requests(job)[0]!.headers["webhook-id"]);

    await vi.waitFor(() => expect(acknowledged(job)).toHaveLength(1), SLOW);
    // The sender logs "delivered" once the receiver's answer reaches it, a moment after the receiver counted it.
    await vi.waitFor(() => expect(senders(id)).toHaveLength(1), SLOW);
    const sender = senders(id);
    expect(sender).toHaveLength(1);
    expect(sender[0]).not.toBe(NODES[killed]);

    // The killed node started again finds nothing left to send.
    cluster.daemons[killed] = await startDaemon(dirs[killed]!, cluster.env);
    await sleep(QUIET_MS);
    expect(requests(job).map((request) => [request.headers["webhook-id"], request.status])).toEqual([
      [id, 503],
      [id, 200],
    ]);
    expect(new Set(hooks.acknowledgedIds()).size).toBe(hooks.acknowledgedIds().length);
    process.stderr.write(
      `cluster outbox: ${NODES[killed]} ran ${job} and was killed with its delivery pending; ${sender[0]} delivered it\n`,
    );
  });
});
