import { spawn } from "node:child_process";
import { appendFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONCURRENCY } from "../../src/delivery/outbox.js";
import { targetKey } from "../../src/delivery/targets.js";
import { readJournal } from "../../src/store/journal.js";
import { OUTBOX_FILE, type OutboxRecord } from "../../src/store/outbox-store.js";
import { seededRandom } from "../support/mutate.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The outbox journal under SIGKILL: a process queues DELIVERIES webhook deliveries, 100 at a
 * time as runs finishing would, and sends them to a loopback receiver; it is killed after a random
 * number of requests, round after round, and after some kills half a record is appended to its journal, as
 * a power cut mid-append would leave it. Then a last process drains the outbox. Nothing queued
 * may be lost, and a delivery sent twice must carry the same webhook-id both times.
 */

const FULL = process.env["COUNTD_FAULTS"] === "full";
const DELIVERIES = FULL ? 10_000 : 2_000;
const KILLS = FULL ? 12 : 4;
const SEED = Number(process.env["COUNTD_CRASH_SEED"] ?? Date.now() % 2 ** 31);
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DIST = resolve(import.meta.dirname, "../../dist");
const hookTarget = (url: string) => ({ kind: "webhook" as const, url, secret: SECRET, format: "json" as const, headers: {} });

/**
 * The sender: queues deliveries from \`from\` on, printing how far each batch's queueing has resolved,
 * sends, and exits once all it queued are settled with the count it delivered. Deliveries before
 * \`from\` were promised queued by an earlier life: they are not queued again, so one lost is missed.
 */
const senderScript = (stateDir: string, url: string, from: number, key: string) => `
  const { Outbox } = await import(${JSON.stringify(`${DIST}/delivery/outbox.js`)});
  const { sendWebhook } = await import(${JSON.stringify(`${DIST}/delivery/webhook.js`)});
  const target = { kind: "webhook", url: ${JSON.stringify(url)}, secret: ${JSON.stringify(SECRET)}, format: "json", headers: {} };
  const outbox = await Outbox.open({ stateDir: ${JSON.stringify(stateDir)}, send: (entry) => sendWebhook(entry.target, entry.message, entry.id).then(() => {}) });
  outbox.start();
  const at = new Date().toISOString();
  for (let i = ${from}; i < ${DELIVERIES}; i += 100) {
    const batch = Array.from({ length: Math.min(100, ${DELIVERIES} - i) }, (_, k) => {
      const run = { id: "run-" + (i + k), reason: "schedule", status: "ok", startedAt: at, finishedAt: at, durationMs: 1, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 } };
      return outbox.enqueue("crash." + run.id, [target], { kind: "run.completed", job: "crash", run, result: "report " + run.id }, ${JSON.stringify(stateDir)});
    });
    await Promise.all(batch);
    process.stdout.write("queued " + (i + batch.length) + "\\n");
  }
  const ids = Array.from({ length: ${DELIVERIES} }, (_, i) => "crash.run-" + i + "." + ${JSON.stringify(key)});
  const settled = await outbox.settled(ids);
  await outbox.close();
  process.stdout.write(JSON.stringify({ delivered: settled.filter((s) => s.delivered).length }) + "\\n");
`;

describe(`the outbox journal killed with SIGKILL ${KILLS} times during ${DELIVERIES} deliveries (seed ${SEED})`, () => {
  const random = seededRandom(SEED);
  let dir: string;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-outbox-crash-"));
    hooks = await startWebhookReceiver({ secret: SECRET });
  });
  afterAll(async () => {
    await hooks.close();
    await rm(dir, { recursive: true, force: true });
  });

  function sender(from: number): { exited: Promise<number | null>; kill: () => void; output: () => string } {
    const script = senderScript(dir, hooks.url, from, targetKey(hookTarget(hooks.url)));
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    return { exited: new Promise((done) => child.on("exit", done)), kill: () => child.kill("SIGKILL"), output: () => output };
  }

  /** Ids the journal records as acknowledged; a line cut short does not count. */
  async function recorded(): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const line of (await readJournal(join(dir, OUTBOX_FILE))).lines) {
      const record = "value" in line ? (line.value as OutboxRecord) : undefined;
      if (record?.op === "delivered") ids.add(record.id);
    }
    return ids;
  }

  it(
    "loses nothing queued, and what it sends again it sends under the same id",
    async () => {
      const key = targetKey(hookTarget(hooks.url));
      const kills: Array<{ requests: number; recorded: Set<string> }> = [];
      let torn = 0;
      let queued = 0;
      for (let kill = 1; kill <= KILLS; kill++) {
        const life = sender(queued);
        // The kill waits for a random number of requests rather than a random time: on a loaded
        // machine a process can take longer than any fixed delay to start sending, and a kill that
        // lands before the first send or after the last tests nothing.
        const span = Math.floor(DELIVERIES / (KILLS + 1));
        const due = hooks.requests.length + 20 + Math.floor(random() * span);
        await Promise.race([hooks.waitFor(due), life.exited, new Promise((done) => setTimeout(done, 30_000))]);
        life.kill();
        await life.exited;
        kills.push({ requests: hooks.requests.length, recorded: await recorded() });
        queued = Math.max(queued, ...[...life.output().matchAll(/^queued (\d+)$/gm)].map((m) => Number(m[1])));
        if (random() < 0.5) {
          // Half of an acknowledgement of a delivery still pending: dropped on open, so it is sent (again) with its id.
          const pending = Array.from({ length: DELIVERIES }, (_, i) => `crash.run-${i}.${key}`).find(
            (id) => !kills.at(-1)!.recorded.has(id),
          );
          if (pending) {
            await appendFile(
              join(dir, OUTBOX_FILE),
              JSON.stringify({ op: "delivered", id: pending, at: new Date().toISOString() }).slice(0, 40),
            );
            torn++;
          }
        }
      }
      const last = sender(queued);
      expect(await last.exited, last.output()).toBe(0);
      expect(JSON.parse(last.output().trim().split("\n").at(-1)!)).toEqual({ delivered: DELIVERIES });

      const arrivals = hooks.requests.map((request, index) => {
        expect(request.verified, `webhook signature (seed ${SEED})`).toBe(true);
        const body = JSON.parse(request.body) as { run: { id: string } };
        return {
          index,
          id: String(request.headers["webhook-id"]),
          expected: `crash.${body.run.id}.${key}`,
          acknowledged: request.status === 200,
        };
      });
      expect(
        arrivals.filter((a) => a.id !== a.expected),
        `sent under another id (seed ${SEED})`,
      ).toEqual([]);
      const taken = new Set(arrivals.filter((a) => a.acknowledged).map((a) => a.id));
      const lost = Array.from({ length: DELIVERIES }, (_, i) => `crash.run-${i}.${key}`).filter((id) => !taken.has(id));
      expect(lost, `queued and never acknowledged (seed ${SEED})`).toEqual([]);

      const lifeOf = (index: number) => kills.filter((kill) => kill.requests <= index).length;
      kills.forEach((kill, k) => {
        const resent = arrivals.filter((a) => lifeOf(a.index) > k && kill.recorded.has(a.id)).map((a) => a.id);
        expect(resent, `sent again after kill ${k + 1} had recorded it as acknowledged (seed ${SEED})`).toEqual([]);
      });
      const acknowledged = arrivals.filter((a) => a.acknowledged);
      const seen = new Map<string, number>();
      const twiceInOneLife = acknowledged.filter((a) => {
        const life = lifeOf(a.index);
        const before = seen.get(`${life}:${a.id}`);
        seen.set(`${life}:${a.id}`, a.index);
        return before !== undefined;
      });
      expect(
        twiceInOneLife.map((a) => a.id),
        `acknowledged twice by one process (seed ${SEED})`,
      ).toEqual([]);
      // The at-least-once window: acknowledged by the receiver, and the kill came before countd synced that.
      kills.forEach((kill, k) => {
        const unrecorded = new Set(acknowledged.filter((a) => lifeOf(a.index) === k && !kill.recorded.has(a.id)).map((a) => a.id));
        expect(unrecorded.size, `acknowledged in life ${k + 1} and not recorded at its kill (seed ${SEED})`).toBeLessThanOrEqual(
          CONCURRENCY,
        );
      });

      const figures = {
        seed: SEED,
        deliveries: DELIVERIES,
        kills: KILLS,
        tornRecords: torn,
        queuedBeforeLastLife: queued,
        requests: arrivals.length,
        acknowledged: acknowledged.length,
        lost: lost.length,
        resentSameId: arrivals.length - new Set(arrivals.map((a) => a.id)).size,
        concurrency: CONCURRENCY,
      };
      console.log(`outbox journal crash: ${JSON.stringify(figures)}`);
      expect(
        kills.some((kill) => kill.recorded.size > 0 && kill.recorded.size < DELIVERIES),
        "a kill came mid-way through the deliveries",
      ).toBe(true);
    },
    FULL ? 600_000 : 120_000,
  );
});
