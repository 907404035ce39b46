import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { describeTarget, targetKey, type EmailTarget, type WebhookTarget } from "../../src/delivery/targets.js";
import { EventBus, type CountdEvents } from "../../src/events.js";
import { OUTBOX_FILE } from "../../src/store/outbox-store.js";
import { completedMessage } from "../support/delivery-message.js";
import { startWebhookReceiver, type ReceiverStep, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * What the console's live view hears of deliveries: the outbox with the senders the daemon uses
 * (sendEntry) against a real webhook receiver on loopback, and an event on the bus for every
 * change, told once the journal holds it. The outbox's clock is moved by hand, as in
 * outbox-peers.test.ts: a 30 s backoff costs nothing; the sends run on real time.
 */

type DeliveryEvent = CountdEvents["delivery"];

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const env = { HOOK_SECRET: SECRET };
const SECOND = 1_000;
const DAY = 24 * 3_600 * SECOND;
const WORKSPACE = "/srv/countd/workspace";
const START = "2026-03-02T08:00:00.000Z";

const message = completedMessage({
  job: "daily-report",
  runId: "20260302T080000Z-ab12",
  startedAt: "2026-03-02T07:59:00.000Z",
  result: "All 3 shipped.",
});
const RUN_KEY = `daily-report.${message.run.id}`;

const mailTo: EmailTarget = { kind: "email", to: ["ops@example.com"], cc: [], bcc: [], attach: [] };
const hookAt = (url: string): WebhookTarget => ({ kind: "webhook", url, secret: "${HOOK_SECRET}", format: "json", headers: {} });

/** The journal record each status is told after. */
const OP: Record<DeliveryEvent["status"], string> = {
  queued: "queued",
  held: "queued",
  released: "released",
  sending: "attempt",
  delivered: "delivered",
  failed: "failed",
  dead: "dead",
  retried: "retried",
  purged: "purged",
};

let dir: string;
let t: number;
const now = () => new Date(t);
const at = (offsetMs: number) => new Date(Date.parse(START) + offsetMs).toISOString();
let mailer: Mailer | undefined;
let receiver: WebhookReceiver | undefined;
let outboxes: Outbox[];
let heard: DeliveryEvent[];
/** For each event heard: whether outbox.jsonl already held its record as the listener ran. */
let journalled: boolean[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-events-"));
  t = Date.parse(START);
  outboxes = [];
  heard = [];
  journalled = [];
});
afterEach(async () => {
  await Promise.all(outboxes.map((outbox) => outbox.close()));
  mailer?.close();
  mailer = undefined;
  await receiver?.close();
  receiver = undefined;
  await rm(dir, { recursive: true, force: true });
});

/** The ops outbox.jsonl holds for this delivery, read as the listener runs. */
function opsOnDisk(id: string): string[] {
  const text = readFileSync(join(dir, OUTBOX_FILE), "utf8");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { op: string; id?: string; entry?: { id: string; status: string } })
    .filter((record) => record.id === id || record.entry?.id === id)
    .map((record) => (record.op === "queued" && record.entry!.status === "dead" ? "queued dead" : record.op));
}

/** The outbox as the daemon opens it, its events heard on a bus of its own. */
async function open(...steps: ReceiverStep[]): Promise<Outbox> {
  receiver ??= await startWebhookReceiver({ secret: SECRET });
  receiver.script(...steps);
  mailer ??= createMailer({ stateDir: dir, timezone: "UTC" });
  const events = new EventBus();
  events.on("delivery", (event) => {
    heard.push(event);
    // Every record this status stands for, told so far, is on disk as the listener hears it.
    const told = heard.filter((e) => e.id === event.id && e.status === event.status).length;
    const op = event.status === "dead" && event.attempts === 0 ? "queued dead" : OP[event.status];
    journalled.push(opsOnDisk(event.id).filter((o) => o === op).length >= told);
  });
  const outbox = await Outbox.open({ stateDir: dir, send: sendEntry(mailer, env), now, random: () => 0.5, events });
  outboxes.push(outbox);
  return outbox;
}

/** Moves the clock to the earliest pending delivery's next attempt and makes the attempts then due. */
async function nextAttempt(outbox: Outbox): Promise<void> {
  const due = outbox.list().pending.map((entry) => Date.parse(entry.nextAttemptAt));
  expect(due.length).toBeGreaterThan(0);
  t = Math.max(t, Math.min(...due));
  await outbox.runDue();
}

const hookError = (status: number) => `http://127.0.0.1:${new URL(receiver!.url).port} answered HTTP ${status}`;

describe("the outbox telling the bus of each delivery's changes", () => {
  it("a delivery that fails once, then is delivered: queued, sending, failed with when it is tried next, sending, delivered", async () => {
    const outbox = await open(500);
    const target = hookAt(receiver!.url);
    const [id] = await outbox.enqueue(RUN_KEY, [target], message, WORKSPACE);
    expect(heard).toEqual([{ id, status: "queued", attempts: 0, target: targetKey(target), to: describeTarget(target), kind: "webhook" }]);

    await outbox.runDue();
    await nextAttempt(outbox);

    const about = { id, target: targetKey(target), to: describeTarget(target), kind: "webhook" };
    expect(heard).toEqual([
      { ...about, status: "queued", attempts: 0 },
      { ...about, status: "sending", attempts: 1 },
      { ...about, status: "failed", attempts: 1, error: hookError(500), nextAttemptAt: at(30 * SECOND) },
      { ...about, status: "sending", attempts: 2 },
      { ...about, status: "delivered", attempts: 2 },
    ]);
    expect(journalled).toEqual([true, true, true, true, true]);
    expect(receiver!.requests.map((r) => [r.headers["webhook-id"], r.status, r.verified])).toEqual([
      [id, 500, true],
      [id, 200, true],
    ]);
    expect(receiver!.acknowledgedIds()).toEqual([id]);
  });

  it("a delivery the receiver refuses for good: queued, sending, dead with the reason; nothing more", async () => {
    const outbox = await open(400);
    const target = hookAt(receiver!.url);
    const [id] = await outbox.enqueue(RUN_KEY, [target], message, WORKSPACE);
    await outbox.runDue();
    t += DAY;
    await outbox.runDue();

    const about = { id, target: targetKey(target), to: describeTarget(target), kind: "webhook" };
    expect(heard).toEqual([
      { ...about, status: "queued", attempts: 0 },
      { ...about, status: "sending", attempts: 1 },
      { ...about, status: "dead", attempts: 1, error: hookError(400) },
    ]);
    expect(journalled).toEqual([true, true, true]);
    expect(receiver!.requests).toHaveLength(1);
  });

  it("a target that answered 410: the delivery is dead, and one queued to it later is told dead at once, never sent", async () => {
    const outbox = await open(410);
    const target = hookAt(receiver!.url);
    const [first] = await outbox.enqueue(RUN_KEY, [target], message, WORKSPACE);
    await outbox.runDue();
    const [later] = await outbox.enqueue("daily-report.20260303T080000Z-cd34", [target], message, WORKSPACE);
    await outbox.runDue();

    const about = { target: targetKey(target), to: describeTarget(target), kind: "webhook" };
    expect(heard).toEqual([
      { ...about, id: first, status: "queued", attempts: 0 },
      { ...about, id: first, status: "sending", attempts: 1 },
      { ...about, id: first, status: "dead", attempts: 1, error: expect.stringContaining(`${hookError(410)} (gone)`) },
      { ...about, id: later, status: "dead", attempts: 0, error: "target disabled after HTTP 410" },
    ]);
    expect(journalled).toEqual([true, true, true, true]);
    expect(receiver!.requests).toHaveLength(1);
  });

  it("retry and purge: a dead delivery retried is told retried, due now, then sent; a purged one is told purged", async () => {
    const outbox = await open(400, 400);
    const target = hookAt(receiver!.url);
    const [a] = await outbox.enqueue("daily-report.20260302T080000Z-aaaa", [target], message, WORKSPACE);
    const [b] = await outbox.enqueue("daily-report.20260302T080000Z-bbbb", [target], message, WORKSPACE);
    await outbox.runDue();
    expect(outbox.list().dead.map((entry) => entry.id)).toEqual([a, b]);
    heard.length = 0;

    t += 3_600 * SECOND;
    expect(await outbox.retry(a!)).toBe(1);
    const about = { target: targetKey(target), to: describeTarget(target), kind: "webhook" };
    expect(heard).toEqual([{ ...about, id: a, status: "retried", attempts: 0, nextAttemptAt: now().toISOString() }]);
    await outbox.runDue();
    expect(await outbox.purge()).toBe(1);

    expect(heard).toEqual([
      { ...about, id: a, status: "retried", attempts: 0, nextAttemptAt: now().toISOString() },
      { ...about, id: a, status: "sending", attempts: 1 },
      { ...about, id: a, status: "delivered", attempts: 1 },
      { ...about, id: b, status: "purged", attempts: 1 },
    ]);
    expect(journalled.every(Boolean)).toBe(true);
    expect(outbox.list()).toEqual({ pending: [], dead: [] });
    expect(receiver!.acknowledgedIds()).toEqual([a]);
  });

  it("tells mail deliveries too, by their target key, recipient and kind", async () => {
    const outbox = await open();
    const [id] = await outbox.enqueue(RUN_KEY, [mailTo], message, WORKSPACE);
    await outbox.runDue();
    const about = { id, target: targetKey(mailTo), to: describeTarget(mailTo), kind: "email" };
    expect(heard).toEqual([
      { ...about, status: "queued", attempts: 0 },
      { ...about, status: "sending", attempts: 1 },
      { ...about, status: "delivered", attempts: 1 },
    ]);
    expect(journalled).toEqual([true, true, true]);
  });
});

describe("Outbox.deliveredIds", () => {
  it("lists a run's acknowledged deliveries by id prefix, with when and their attempts, oldest first: not another run's, not those pending or dead", async () => {
    const outbox = await open(400);
    const good = hookAt(receiver!.url);
    const refusing = hookAt(`${receiver!.url}?refuse=1`);
    const run = "daily-report.20260302T080000Z-ab12";
    const [deadId] = await outbox.enqueue(run, [refusing], message, WORKSPACE);
    await outbox.runDue();
    const [hookId] = await outbox.enqueue(run, [good], message, WORKSPACE);
    await outbox.runDue();
    t += 5 * SECOND;
    const [mailId] = await outbox.enqueue(run, [mailTo], message, WORKSPACE);
    // A run whose id starts like this one's, and another job's run with the same id.
    await outbox.enqueue(`${run}0`, [good], message, WORKSPACE);
    await outbox.enqueue(`inbox-orders.20260302T080000Z-ab12`, [good], message, WORKSPACE);
    await outbox.runDue();
    expect(outbox.list().dead.map((entry) => entry.id)).toEqual([deadId]);
    expect(receiver!.acknowledgedIds()).toHaveLength(3);

    const expected = [
      { id: hookId, at: at(0), attempts: 1 },
      { id: mailId, at: at(5 * SECOND), attempts: 1 },
    ];
    expect(outbox.deliveredIds(`${run}.`)).toEqual(expected);
    expect(outbox.deliveredIds("daily-report.20260302T080000Z-ffff.")).toEqual([]);

    // From the journal after a restart, and forgotten 7 days after delivery.
    await outbox.close();
    const reopened = await open();
    expect(reopened.deliveredIds(`${run}.`)).toEqual(expected);
    // Also by an outbox that stayed open and recorded nothing since.
    t = Date.parse(START) + 7 * DAY + 1;
    expect(reopened.deliveredIds(`${run}.`)).toEqual([{ id: mailId, at: at(5 * SECOND), attempts: 1 }]);
    await reopened.close();
    expect((await open()).deliveredIds(`${run}.`)).toEqual([{ id: mailId, at: at(5 * SECOND), attempts: 1 }]);
  });
});
