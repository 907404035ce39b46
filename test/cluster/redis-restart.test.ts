import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import { startDaemon, stopDaemon } from "../support/cli-daemon.js";
import { logLines } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Three daemons, each a `countd start` process in a folder of its own, share one real redis-server
 * (append-only file, fsync every second). Redis is ended twice while runs are in progress, once
 * with SIGKILL and once with SIGTERM, each time kept down for a few seconds (across slots of a
 * job due every 2 s), then started again on the same port and data directory. What is checked is
 * what a user sees: the run records `countd history` lists, and the Standard Webhooks messages a
 * receiver got. No timing is asserted; how long the daemons took to reconnect is printed.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PERIOD = 2_000;
/** How long each run waits for its answer: a run spans two slots, so one is in progress at any time. */
const RUN_MS = 3_500;
/** How long Redis stays down each time: across at least two slots, well inside a fire's hold (LOCK_MS). */
const OUTAGE_MS = 5_000;
/** The daemons' runner.shutdown_grace (cluster-nodes.ts). */
const GRACE_MS = 2_000;
/** How long past its grace a daemon stopped while Redis is down may take before it counts as hung. */
const STOP_BOUND_MS = 30_000;
const SLOW = { timeout: 90_000, interval: 1_000 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!hasRedis)("Redis ended and started again while three daemons run a job", { timeout: 300_000 }, () => {
  const cluster = useCluster({ env: { HOOK_SECRET: SECRET } });
  const { mock } = cluster;
  let hooks: WebhookReceiver;
  /** LLM calls waiting for their answer now: a run is in progress. */
  let inFlight = 0;

  beforeAll(async () => {
    hooks = await startWebhookReceiver({ secret: SECRET });
  });
  afterAll(async () => {
    await hooks?.close();
  });
  afterEach(async (context) => {
    // What the daemons said, for a failure on a machine where it cannot be watched.
    if (context.task.result?.state === "fail")
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-8_000)}\n`);
    await cluster.stopDaemons();
  });

  /** A job due every 2 s whose runs take RUN_MS, each reported to the receiver. */
  function slowJob(job: string): string {
    mock.onMessage(`slow ${job}`, async () => {
      inFlight++;
      await sleep(RUN_MS);
      inFlight--;
      return { content: `the report of ${job}` };
    });
    return [
      `prompt: slow ${job}`,
      `every: ${PERIOD / 1000}s`,
      "overlap: allow",
      "deliver:",
      "  - webhook:",
      `      url: ${hooks.url}?job=${job}`,
      "      secret: ${HOOK_SECRET}",
      "",
    ].join("\n");
  }

  /** Redis ended with `signal` while a run is in progress, kept down OUTAGE_MS, started again: when it went and came back. */
  async function outage(signal: "SIGKILL" | "SIGTERM"): Promise<{ down: number; up: number }> {
    await vi.waitFor(() => expect(inFlight).toBeGreaterThan(0), { timeout: 30_000, interval: 50 });
    const down = Date.now();
    await cluster.redis.kill(signal);
    await sleep(OUTAGE_MS);
    await cluster.redis.restart();
    return { down, up: Date.now() };
  }

  /** The run ids each webhook message was about, one entry per message. */
  function deliveredRunIds(job: string): string[] {
    return hooks.requests
      .filter((request) => new URL(request.url, hooks.url).searchParams.get("job") === job)
      .map((request) => {
        expect(request).toMatchObject({ verified: true, status: 200 });
        return (JSON.parse(request.body) as { run: { id: string } }).run.id;
      });
  }

  /** Between `from` and `until`: when the last daemon logged it reconnected, ms after `from` (undefined: not logged). */
  function reconnectedAfter(from: number, until = Infinity): number | undefined {
    const times = cluster.daemons.flatMap((daemon) =>
      logLines(daemon.output(), "connected to Redis again")
        .map((line) => Number(line["time"]))
        .filter((time) => time >= from && time < until),
    );
    return times.length === 0 ? undefined : Math.max(...times) - from;
  }

  it("reconnects, finishes the runs in progress and saves their records, runs every slot once (those due while Redis was down too), and delivers each run once", async () => {
    const job = "ticker";
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, { [job]: slowJob(job) }, ["job_env: [HOOK_SECRET]"])),
    );
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));
    const allUp = Date.now();
    await sleep(4_000);
    const killed = await outage("SIGKILL");
    await sleep(6_000);
    const terminated = await outage("SIGTERM");
    await sleep(8_000);
    const firstDown = Date.now();
    expect(await Promise.all(cluster.daemons.map((daemon) => stopDaemon(daemon)))).toEqual([0, 0, 0]);

    const [runs, ...others] = await Promise.all(dirs.map((dir) => nodeHistory(dir, job, cluster.env)));
    for (const other of others) expect(other.map((run) => run.id).sort()).toEqual(runs!.map((run) => run.id).sort());
    expect(runs!.filter((run) => run.status === "running")).toEqual([]);

    const bySlot = new Map<string, RunRecord[]>();
    for (const run of runs!) bySlot.set(run.scheduledAt, [...(bySlot.get(run.scheduledAt) ?? []), run]);
    const doubled = [...bySlot].filter(([, same]) => same.length > 1);
    expect(doubled).toEqual([]);
    // Every slot from a slot after all three started to one whose run ended well before the first stopped.
    const expected: string[] = [];
    for (let slot = Math.ceil((allUp + PERIOD) / PERIOD) * PERIOD; slot < firstDown - RUN_MS - PERIOD; slot += PERIOD)
      expected.push(new Date(slot).toISOString());
    const missed = expected.filter((slot) => !bySlot.has(slot));
    expect(missed).toEqual([]);
    for (const slot of expected) expect(bySlot.get(slot)![0]).toMatchObject({ status: "ok", reason: "schedule" });

    // Slots due while Redis was down, run once it was back.
    for (const { down, up } of [killed, terminated]) {
      const during = expected.filter((slot) => Date.parse(slot) > down && Date.parse(slot) < up);
      expect(during.length).toBeGreaterThanOrEqual(2);
      // Runs in progress when Redis went, ended ok, their records saved.
      const across = runs!.filter((run) => Date.parse(run.startedAt) < down && Date.parse(run.finishedAt!) > down);
      expect(across.length).toBeGreaterThan(0);
      for (const run of across) expect(run.status).toBe("ok");
    }

    // Each run that ended ok reported once; no message twice.
    const delivered = deliveredRunIds(job);
    expect(delivered.sort()).toEqual(
      runs!
        .filter((run) => run.status === "ok")
        .map((run) => run.id)
        .sort(),
    );
    expect(new Set(hooks.acknowledgedIds()).size).toBe(hooks.acknowledgedIds().length);

    // Each of the two outages said once per connection (the queues'; the records', the shared
    // state's subscriber and the view's subscriber), not at every reconnection attempt.
    const perOutage = ["queues", "records", "records", "records"];
    for (const daemon of cluster.daemons) {
      expect(
        logLines(daemon.output(), "lost the connection to Redis; reconnecting")
          .map((line) => line["role"])
          .sort(),
      ).toEqual([...perOutage, ...perOutage].sort());
      expect(logLines(daemon.output()).filter((line) => line["level"] === 50 && String(line["msg"]).startsWith("cluster "))).toEqual([]);
    }

    const killedReconnect = reconnectedAfter(killed.up, terminated.down);
    const terminatedReconnect = reconnectedAfter(terminated.up);
    process.stderr.write(
      `cluster redis restart: ${expected.length} slots, ${runs!.length} runs, ${doubled.length} doubled, ${missed.length} missed; ` +
        `reconnected (last connection of the three daemons) ${killedReconnect ?? "?"} ms after SIGKILLed Redis was back, ${terminatedReconnect ?? "?"} ms after SIGTERMed Redis was back; ` +
        `by node: ${NODES.map((node) => `${node} ${runs!.filter((run) => run.node === node).length}`).join(", ")}\n`,
    );
  });

  it("a daemon stopped (SIGTERM) while Redis is down exits within its shutdown grace and a bound, and its run is recorded interrupted once Redis is back", async () => {
    const job = "stopped";
    const dir = await nodeFolder(cluster.redis.url, "n1", { [job]: slowJob(job) }, ["job_env: [HOOK_SECRET]"]);
    cluster.daemons = [await startDaemon(dir, cluster.env)];
    await vi.waitFor(() => expect(inFlight).toBeGreaterThan(0), { timeout: 30_000, interval: 50 });
    await cluster.redis.kill("SIGKILL");
    const asked = Date.now();
    cluster.daemons[0]!.child.kill("SIGTERM");
    const hung = Symbol("hung");
    const code = await Promise.race([cluster.daemons[0]!.exited, sleep(GRACE_MS + STOP_BOUND_MS).then(() => hung)]);
    const tookMs = Date.now() - asked;
    expect(code).toBe(0);
    await cluster.redis.restart();

    // Started again, it finds the run it left held in Redis: recorded interrupted, not left `running`.
    cluster.daemons = [await startDaemon(dir, cluster.env)];
    await vi.waitFor(async () => {
      const runs = await nodeHistory(dir, job, cluster.env);
      expect(runs.length).toBeGreaterThan(0);
      expect(runs.filter((run) => run.status === "running" && Date.parse(run.startedAt) < asked)).toEqual([]);
    }, SLOW);
    process.stderr.write(`cluster redis down at stop: the daemon exited ${tookMs} ms after SIGTERM (shutdown_grace ${GRACE_MS} ms)\n`);
  });
});
