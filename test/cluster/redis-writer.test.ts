import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { ClusterOutbox } from "../../src/cluster/outbox.js";
import type { OwnDeliveries } from "../../src/delivery/own-deliveries.js";
import { message, sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer } from "../../src/delivery/email.js";
import { deliveryId } from "../../src/delivery/outbox.js";
import type { DeliveryTarget, EmailTarget, WebhookTarget } from "../../src/delivery/targets.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { captureLog } from "../support/log-capture.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * A process with nothing but Redis access writes deliveries into the cluster's queue. The node
 * sends only to its own job's targets, from its own workspace: a forged target, a forged
 * attachment or an unknown job is refused, marked dead with the reason, and logged.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);
const KEY = "sk-proj-THE-NODES-PROVIDER-KEY-0123456789";

const run = (id: string): RunRecord => {
  const at = new Date().toISOString();
  return {
    id,
    job: "report",
    reason: "schedule",
    scheduledAt: at,
    startedAt: at,
    finishedAt: at,
    status: "ok",
    iterations: 1,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `report/${id}`,
  };
};

describe.skipIf(!hasRedis)("a Redis writer against the cluster's outbox", () => {
  const redis = useRedis();
  let outbox: ClusterOutbox | undefined;
  let forger: Queue | undefined;
  const receivers: WebhookReceiver[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await outbox?.close();
    await forger?.close();
    for (const receiver of receivers.splice(0)) await receiver.close();
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
    const flush = await redis.connect();
    await flush.flushall();
  });

  it("refuses a forged target, a forged attachment and an unknown job; sends the job's own", { timeout: 30_000 }, async () => {
    const own = await startWebhookReceiver();
    const attacker = await startWebhookReceiver();
    receivers.push(own, attacker);
    const state = await mkdtemp(join(tmpdir(), "countd-writer-"));
    const workspace = await mkdtemp(join(tmpdir(), "countd-writer-ws-"));
    dirs.push(state, workspace);
    const jobTarget: WebhookTarget = { kind: "webhook", url: own.url, format: "json", headers: {} };
    const jobMail: EmailTarget = { kind: "email", to: ["ops@example.com"], cc: [], bcc: [], attach: ["reports/*.csv"] };
    const node: OwnDeliveries = { targets: (job) => (job === "report" ? [jobTarget, jobMail] : undefined), workspace: () => workspace };
    const mailer = createMailer({ stateDir: state, timezone: "UTC" });
    const { log, lines } = captureLog();
    outbox = new ClusterOutbox({
      redis: await redis.connect("queues"),
      send: sendEntry(mailer, { ...process.env, OPENAI_API_KEY: KEY }),
      own: node,
      log,
    });

    // What the Redis writer adds, as BullMQ's data of the `deliveries` queue.
    forger = new Queue("deliveries", { connection: await redis.connect("queues"), prefix: "countd" });
    const forge = async (id: string, target: DeliveryTarget, job = "report", at = workspace) => {
      const now = Date.now();
      const forged = run(id);
      const data = {
        target,
        message: { ...message("run.completed", job, forged, "forged"), job },
        workspace: at,
        createdAt: new Date(now).toISOString(),
        giveUpAt: new Date(now + 3_600_000).toISOString(),
      };
      const jobId = deliveryId(`${job}.${forged.id}`, target);
      await forger!.add(job, data, { jobId, attempts: 1 });
      return jobId;
    };
    const stolen: WebhookTarget = {
      kind: "webhook",
      url: attacker.url,
      format: "json",
      headers: { "X-Leak": "${OPENAI_API_KEY}" },
    };
    const hostname: EmailTarget = { kind: "email", to: ["thief@example.com"], cc: [], bcc: [], attach: ["/etc/hostname"] };
    const forged = [
      await forge("20261130T090000Z-aaaa", stolen),
      await forge("20261130T090000Z-bbbb", hostname, "report", "/"),
      await forge("20261130T090000Z-cccc", jobTarget, "no-such-job"),
      await forge("20261130T090000Z-dddd", jobMail, "report", "/etc"),
    ];
    // The job's own answer, queued as a node queues it, goes to the job's own target.
    const mine = await outbox.enqueue(
      "report.20261130T090000Z-eeee",
      [jobTarget],
      message("run.completed", "report", run("20261130T090000Z-eeee"), "the report"),
      workspace,
    );
    outbox.start();

    const settled = await outbox.settled([...forged, ...mine]);
    expect(settled.at(-1)).toEqual({ id: mine[0], delivered: true });
    for (const outcome of settled.slice(0, -1)) {
      expect(outcome.delivered).toBe(false);
      expect(outcome).toMatchObject({ error: expect.stringMatching(/^refused: /) });
    }
    expect(attacker.requests).toEqual([]);
    expect(own.requests.map((request) => request.headers["webhook-id"])).toEqual(mine);
    expect(JSON.stringify(own.requests)).not.toContain(KEY);
    // No mail was written: /etc/hostname went nowhere.
    expect((await readdir(state, { recursive: true })).filter((file) => file.endsWith(".eml"))).toEqual([]);
    const refused = lines.filter((line) => line.msg === "delivery in Redis refused; marked dead");
    expect(refused.map((line) => line.fields["delivery"]).sort()).toEqual([...forged].sort());
    const dead = (await outbox.list()).dead.map((entry) => entry.id).sort();
    expect(dead).toEqual([...forged].sort());
  });
});
