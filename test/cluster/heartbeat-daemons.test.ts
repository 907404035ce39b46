import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { stopDaemon } from "../support/cli-daemon.js";
import { logLines } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * The heartbeat of three `countd start` processes on one real redis-server: each daemon ticks, one
 * decides each tick, on the heartbeat state all three share (daily cap, dedupe, last contact).
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const EVERY_MS = 3_000;
const MAX_PER_DAY = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!hasRedis)("the heartbeat of three daemons on one Redis", { timeout: 150_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;
  let smtp: SmtpPeer;

  beforeEach(async () => {
    smtp = await startSmtpPeer();
  });
  afterEach(async () => {
    await cluster.stopDaemons();
    await smtp.close();
    const client = new Redis(cluster.redis.url);
    await client.flushdb();
    client.disconnect();
  });

  /** Three nodes whose heartbeat ticks every EVERY_MS all day, with no idle threshold, reading `checklist` (absent if undefined). */
  async function nodes(checklist: string | undefined): Promise<string[]> {
    return Promise.all(
      NODES.map(async (node) => {
        const settings = [
          `smtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: "countd <countd@example.com>"`,
          `heartbeat:\n  enabled: true\n  every: ${EVERY_MS}ms\n  active_hours: "00:00-00:00"\n  idle_threshold: 0s\n  max_per_day: ${MAX_PER_DAY}\n  checklist: ../HEARTBEAT.md\n  deliver:\n    - email: { to: [me@example.com] }`,
        ];
        const dir = await nodeFolder(cluster.redis.url, node, {}, settings);
        if (checklist !== undefined) await writeFile(join(dir, "HEARTBEAT.md"), checklist);
        return dir;
      }),
    );
  }

  /** The slot of each heartbeat decision the daemons logged (a tick is logged once it is decided). */
  const decisions = (msg: string) =>
    cluster.daemons.flatMap((daemon) =>
      logLines(daemon.output(), msg).map((line) => ({
        slot: Math.floor(Number(line["time"]) / EVERY_MS),
        reason: String(line["reason"] ?? ""),
      })),
    );

  it("with something to say, one daemon decides each tick: one check-in per tick, the daily cap counted across the cluster", async () => {
    let asked = 0;
    mock.on({ userMessage: "Heartbeat check-in", hasToolResult: false }, () => ({
      toolCalls: [
        { name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: `Check-in ${++asked}: water the plants.` }) },
      ],
    }));
    mock.on({ userMessage: "Heartbeat check-in", hasToolResult: true }, { content: "Sent." });
    const dirs = await nodes("- [ ] water the plants\n");
    await startNodes(dirs, cluster.env, cluster.daemons);
    await smtp.waitFor(MAX_PER_DAY);
    // Ticks enough for every node to have decided one more check-in of its own, were the cap its own.
    await vi.waitFor(
      () =>
        expect(decisions("heartbeat skipped").filter((skip) => skip.reason.startsWith("daily cap reached")).length).toBeGreaterThanOrEqual(
          3,
        ),
      {
        timeout: 30_000,
        interval: 500,
      },
    );
    expect(await Promise.all(cluster.daemons.map((daemon) => stopDaemon(daemon)))).toEqual([0, 0, 0]);

    expect(smtp.received.map((mail) => mail.mail.text?.trim())).toEqual(
      Array.from({ length: MAX_PER_DAY }, (_, i) => expect.stringContaining(`Check-in ${i + 1}: water the plants.`)),
    );
    // Each check-in asked the LLM twice (the answer, then the tool result), no tick more than once.
    expect(mock.getRequests()).toHaveLength(2 * MAX_PER_DAY);
    const runs = await nodeHistory(dirs[0]!, "@heartbeat", cluster.env);
    expect(runs.map((run) => run.status)).toEqual(Array(MAX_PER_DAY).fill("ok"));
    // Every tick decided once: a check-in's by its run's start, a skipped one's by its log line.
    const decided = [
      ...runs.map((run) => Math.floor(Date.parse(run.scheduledAt) / EVERY_MS)),
      ...decisions("heartbeat skipped").map((skip) => skip.slot),
    ];
    expect(new Set(decided).size).toBe(decided.length);
    process.stderr.write(
      `cluster heartbeat: ${smtp.received.length} check-ins, ${decided.length} ticks decided once each, by node: ${runs.map((run) => run.node).join(", ")}\n`,
    );
  });

  it("idle, asks the LLM on no node: each tick decided once, without a request", async () => {
    mock.on({ userMessage: "Heartbeat check-in" }, { content: "HEARTBEAT_OK" });
    // A check-in already delivered today (on some node) and no checklist: nothing to do.
    const client = new Redis(cluster.redis.url);
    const checkIns = { delivered: [{ at: new Date().toISOString(), hash: "earlier" }] };
    await client.hset("countd:state:jobs", "@heartbeat", JSON.stringify({ checkIns }));
    client.disconnect();
    const dirs = await nodes(undefined);
    await startNodes(dirs, cluster.env, cluster.daemons);
    await vi.waitFor(() => expect(decisions("heartbeat skipped").length).toBeGreaterThanOrEqual(4), { timeout: 40_000, interval: 500 });
    await sleep(EVERY_MS);
    expect(await Promise.all(cluster.daemons.map((daemon) => stopDaemon(daemon)))).toEqual([0, 0, 0]);

    expect(mock.getRequests()).toEqual([]);
    const skipped = decisions("heartbeat skipped");
    for (const skip of skipped) expect(skip.reason).toMatch(/^nothing to do: no checklist file/);
    expect(new Set(skipped.map((skip) => skip.slot)).size).toBe(skipped.length);
    expect(smtp.received).toEqual([]);
    process.stderr.write(`cluster heartbeat idle: ${skipped.length} ticks decided once each, ${mock.getRequests().length} LLM requests\n`);
  });
});
