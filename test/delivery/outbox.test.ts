import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { simpleParser } from "mailparser";
import { createMailer, messageIdLocalPart } from "../../src/delivery/email.js";
import { DeliveryError } from "../../src/delivery/errors.js";
import { Outbox, type OutboxEntry, type SendFn } from "../../src/delivery/outbox.js";
import { OutboxStore } from "../../src/store/outbox-store.js";
import { retryDelayMs } from "../../src/delivery/schedule.js";
import { targetKey, type DeliveryTarget, type WebhookTarget } from "../../src/delivery/targets.js";
import { sendWebhook } from "../../src/delivery/webhook.js";
import type { Logger } from "../../src/log.js";
import { emptyUsage } from "../../src/providers/types.js";
import { runId } from "../../src/runner/run-ids.js";
import { captureLog, type LogLine } from "../support/log-capture.js";
import { startWebhookReceiver } from "../support/webhook-receiver.js";
import { completedMessage } from "../support/delivery-message.js";

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const hook = (host = "hooks.example.com"): WebhookTarget => ({
  kind: "webhook",
  url: `https://${host}/countd`,
  format: "json",
  headers: {},
});
const mail: DeliveryTarget = { kind: "email", to: ["ops@example.com"], cc: [], bcc: [], attach: [] };

const message = completedMessage({
  job: "daily-report",
  runId: "run-1",
  startedAt: "2026-03-02T07:59:00.000Z",
  result: "All green.",
  usage: emptyUsage(),
});

const httpError = (status: number, opts: { retryAfterMs?: number } = {}) =>
  new DeliveryError(`https://hooks.example.com answered HTTP ${status}`, {
    permanent: status >= 400 && status < 500 && ![408, 425, 429].includes(status),
    status,
    ...opts,
  });

/** The wall clock the outbox sees, moved by hand: a day of backoff takes no time. */
function fakeClock(start = "2026-03-02T08:00:00.000Z") {
  let t = Date.parse(start);
  return {
    now: () => new Date(t),
    advance: (ms: number) => void (t += ms),
    set: (iso: string) => void (t = Date.parse(iso)),
    at: (offsetMs: number) => new Date(Date.parse(start) + offsetMs).toISOString(),
  };
}

/** A send that fails with the given errors in turn, then succeeds; records the id of every attempt. */
function scripted(...failures: Error[]) {
  const calls: string[] = [];
  const send: SendFn = async (entry) => {
    calls.push(entry.id);
    const failure = failures.shift();
    if (failure) throw failure;
  };
  return { calls, send };
}

let dir: string;
let clock: ReturnType<typeof fakeClock>;
let log: Logger;
let logs: LogLine[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-"));
  clock = fakeClock();
  ({ log, lines: logs } = captureLog());
});

/** The outboxes a test opened, closed after it: a reopen stands for a restart, and the first one's journal must not be left to the garbage collector. */
const opened: Outbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
});

async function open(send: SendFn, random = () => 0.5): Promise<Outbox> {
  const outbox = await Outbox.open({ stateDir: dir, send, now: clock.now, random, log });
  opened.push(outbox);
  return outbox;
}

const onDisk = async (): Promise<Record<string, OutboxEntry>> => (await OutboxStore.read(dir, clock.now())).entries;

describe("Outbox", () => {
  it("writes a delivery to disk before its first attempt, which starts at once, and removes it once acknowledged", async () => {
    const seenOnDisk: Array<OutboxEntry | undefined> = [];
    const outbox = await open(async (entry) => {
      seenOnDisk.push((await onDisk())[entry.id]);
    });
    outbox.start();
    const ids = await outbox.enqueue("daily-report.run-1", [hook()], message, "/srv/workspace");
    await outbox.stop();

    expect(ids).toEqual([`daily-report.run-1.${targetKey(hook())}`]);
    expect(seenOnDisk).toEqual([
      expect.objectContaining({ id: ids[0], status: "pending", attempts: 1, message, workspace: "/srv/workspace", target: hook() }),
    ]);
    expect(outbox.deliveredAt(ids[0]!)).toEqual(clock.now());
    expect(outbox.list()).toEqual({ pending: [], dead: [] });
    expect(await onDisk()).toEqual({});
  });

  it("ids name the job, the run and the target, so two jobs' runs with the same run id are both delivered", async () => {
    const { calls, send } = scripted();
    const outbox = await open(send);
    const sameRun = runId(clock.now());
    const [a] = await outbox.enqueue(`daily-report.${sameRun}`, [hook()], message, "/ws");
    const [b] = await outbox.enqueue(`inbox-orders.${sameRun}`, [hook()], message, "/ws");
    await outbox.runDue();

    expect(a).toBe(`daily-report.${sameRun}.${targetKey(hook())}`);
    expect(calls).toEqual([a, b]);
    expect(outbox.deliveredAt(b!)).toBeDefined();
  });

  it("ids serve as they are as the Message-ID: <id@countd>", async () => {
    const mailer = createMailer({ stateDir: dir, timezone: "UTC" });
    const outbox = await open(async (entry) => {
      if (entry.target.kind === "email") await mailer.send(entry.target, entry.message, entry.id, entry.workspace);
    });
    const runKey = `daily-report.${runId(clock.now())}`;
    const ids = await outbox.enqueue(runKey, [mail, hook()], message, dir);
    await outbox.runDue();

    expect(ids).toEqual([`${runKey}.${targetKey(mail)}`, `${runKey}.${targetKey(hook())}`]);
    for (const id of ids) expect(messageIdLocalPart(id)).toBe(id);
    const sent = await simpleParser(await readFile(join(dir, "mail", `${ids[0]}.eml`)));
    expect(sent.messageId).toBe(`<${ids[0]}@countd>`);
  });

  it("retries 500, 500, 200 after 30 s and 2 min: three attempts with one id, delivered once", async () => {
    const { calls, send } = scripted(httpError(500), httpError(500));
    const outbox = await open(send);
    const [id] = await outbox.enqueue("run-1", [hook()], message, "/ws");

    await outbox.runDue();
    expect(outbox.list().pending).toEqual([
      expect.objectContaining({
        id,
        attempts: 1,
        lastError: "https://hooks.example.com answered HTTP 500",
        nextAttemptAt: clock.at(30 * SECOND),
      }),
    ]);
    clock.advance(30 * SECOND - 1);
    await outbox.runDue();
    expect(calls).toHaveLength(1);

    clock.advance(1);
    await outbox.runDue();
    expect(outbox.list().pending).toEqual([expect.objectContaining({ attempts: 2, nextAttemptAt: clock.at(30 * SECOND + 2 * MINUTE) })]);

    clock.advance(2 * MINUTE);
    await outbox.runDue();
    expect(calls).toEqual([id, id, id]);
    expect(outbox.deliveredAt(id!)).toEqual(clock.now());
    expect(outbox.list()).toEqual({ pending: [], dead: [] });

    clock.advance(2 * DAY);
    await outbox.runDue();
    expect(calls).toHaveLength(3);
  });

  it("marks a permanent failure dead at once with the reason", async () => {
    const { calls, send } = scripted(httpError(400));
    const outbox = await open(send);
    const [id] = await outbox.enqueue("run-1", [hook()], message, "/ws");
    await outbox.runDue();
    clock.advance(DAY);
    await outbox.runDue();

    expect(calls).toEqual([id]);
    expect(outbox.list()).toEqual({
      pending: [],
      dead: [expect.objectContaining({ id, attempts: 1, lastError: "https://hooks.example.com answered HTTP 400" })],
    });
    expect(logs).toContainEqual({
      level: "warn",
      msg: "delivery failed for good",
      fields: expect.objectContaining({ component: "outbox", delivery: id, error: "https://hooks.example.com answered HTTP 400" }),
    });
  });

  it("tells when given deliveries are settled: once every one is acknowledged or dead, not while one is still pending", async () => {
    const { send } = scripted(httpError(500), httpError(400));
    const outbox = await open(send);
    const ids = await outbox.enqueue("run-1", [hook("a.example.com"), hook("b.example.com")], message, "/ws");
    let settled: unknown;
    const waiting = outbox.settled(ids).then((result) => (settled = result));
    await outbox.runDue();
    // b failed for good (400); a answered 500 and waits for its retry in 30 s.
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBeUndefined();
    clock.advance(MINUTE);
    await outbox.runDue();
    await waiting;
    expect(settled).toEqual([
      { id: ids[0], delivered: true },
      { id: ids[1], delivered: false, error: "https://hooks.example.com answered HTTP 400" },
    ]);
    expect(await outbox.settled(ids)).toEqual(settled);
  });

  it("on HTTP 410 marks the delivery dead and disables the target: its other deliveries, queued or later, are not sent", async () => {
    const gone = hook("gone.example.com");
    const calls: string[] = [];
    const goneAnswers = [
      httpError(503),
      new DeliveryError("https://gone.example.com answered HTTP 410 (gone)", { permanent: true, status: 410, disableTarget: true }),
    ];
    const outbox = await open(async (entry) => {
      calls.push(entry.id);
      if (entry.target.kind === "webhook" && entry.target.url === gone.url) {
        const answer = goneAnswers.shift();
        if (answer) throw answer;
      }
    });
    const [waiting] = await outbox.enqueue("run-0", [gone], message, "/ws");
    await outbox.runDue();
    const [goneId, otherId] = await outbox.enqueue("run-1", [gone, mail], message, "/ws");
    await outbox.runDue();

    expect(outbox.disabledTargets()).toEqual([targetKey(gone)]);
    expect(outbox.deliveredAt(otherId!)).toBeDefined();
    expect(outbox.list().dead).toEqual([
      expect.objectContaining({ id: waiting, lastError: "target disabled after HTTP 410" }),
      expect.objectContaining({ id: goneId, lastError: "https://gone.example.com answered HTTP 410 (gone)" }),
    ]);
    expect(logs).toContainEqual({
      level: "warn",
      msg: expect.stringContaining("delivery target disabled"),
      fields: expect.objectContaining({ target: targetKey(gone) }),
    });

    const [later] = await outbox.enqueue("run-2", [gone], message, "/ws");
    clock.advance(DAY);
    await outbox.runDue();
    expect(outbox.list().dead).toContainEqual(
      expect.objectContaining({ id: later, attempts: 0, lastError: "target disabled after HTTP 410" }),
    );
    expect(calls.sort()).toEqual([waiting!, goneId!, otherId!].sort());
    expect(logs).toContainEqual({
      level: "warn",
      msg: "delivery not sent",
      fields: { component: "outbox", delivery: later, target: targetKey(gone), error: "target disabled after HTTP 410" },
    });

    // Stays disabled across a restart.
    const reopened = await open(scripted().send);
    expect(reopened.disabledTargets()).toEqual([targetKey(gone)]);
  });

  it("waits as long as Retry-After asks when that is longer than the backoff, and no less than the backoff", async () => {
    const outbox = await open(async (entry) => {
      const host = entry.target.kind === "webhook" ? new URL(entry.target.url).hostname : "";
      throw host === "a.example.com" ? httpError(429, { retryAfterMs: 5 * MINUTE }) : httpError(503, { retryAfterMs: SECOND });
    });
    const [slow, quick] = await outbox.enqueue("run-1", [hook("a.example.com"), hook("b.example.com")], message, "/ws");
    await outbox.runDue();

    const next = Object.fromEntries(outbox.list().pending.map((e) => [e.id, e.nextAttemptAt]));
    expect(next).toEqual({ [slow!]: clock.at(5 * MINUTE), [quick!]: clock.at(30 * SECOND) });
  });

  it("spreads retries by ±15 % so deliveries that failed together do not retry together", async () => {
    const randoms = [0, 0.5, 0.999];
    const { send } = scripted(httpError(500), httpError(500), httpError(500));
    const outbox = await open(send, () => randoms.shift()!);
    await outbox.enqueue("run-1", [hook("a.example.com"), hook("b.example.com"), hook("c.example.com")], message, "/ws");
    await outbox.runDue();

    const waits = outbox.list().pending.map((e) => Date.parse(e.nextAttemptAt) - clock.now().getTime());
    expect(waits.sort((a, b) => a - b)).toEqual([25_500, 30_000, 34_491]);
    expect(retryDelayMs(6, () => 0.5)).toBe(HOUR);
    expect(retryDelayMs(20, () => 0.5)).toBe(HOUR);
  });

  it("retries on the schedule (30 s, 2 min, 10 min, 30 min, 1 h, then hourly) and gives up 24 h after queueing", async () => {
    const attemptsAt: number[] = [];
    const outbox = await open(async () => {
      attemptsAt.push((clock.now().getTime() - Date.parse(clock.at(0))) / MINUTE);
      throw httpError(503);
    });
    const [id] = await outbox.enqueue("run-1", [hook()], message, "/ws");
    await outbox.runDue();
    while (outbox.list().pending.length > 0) {
      clock.set(outbox.list().pending[0]!.nextAttemptAt);
      await outbox.runDue();
    }

    const hourly = Array.from({ length: 22 }, (_, i) => 102.5 + 60 * (i + 1));
    expect(attemptsAt).toEqual([0, 0.5, 2.5, 12.5, 42.5, 102.5, ...hourly]);
    expect(outbox.list().dead).toEqual([
      expect.objectContaining({ id, attempts: 28, lastError: "gave up after 24 h: https://hooks.example.com answered HTTP 503" }),
    ]);

    // A retry gives it a fresh 24 h: one more failure keeps it pending.
    expect(await outbox.retry(id!)).toBe(1);
    await outbox.runDue();
    expect(outbox.list().pending).toEqual([
      expect.objectContaining({ id, attempts: 1, nextAttemptAt: new Date(clock.now().getTime() + 30 * SECOND).toISOString() }),
    ]);
  });

  it("resumes pending deliveries after a restart, with the same id", async () => {
    const first = scripted(httpError(500));
    const before = await open(first.send);
    const [id] = await before.enqueue("run-1", [hook()], message, "/ws");
    await before.runDue();
    await before.stop();

    clock.advance(30 * SECOND);
    const second = scripted();
    const after = await open(second.send);
    expect(after.list().pending).toEqual([
      expect.objectContaining({ id, attempts: 1, lastError: "https://hooks.example.com answered HTTP 500" }),
    ]);
    after.start();
    await after.stop();
    expect(second.calls).toEqual([id]);
    expect(after.deliveredAt(id!)).toEqual(clock.now());
  });

  it("never sends a delivered message again: not after a restart, not when queued again, not on retry", async () => {
    const first = scripted();
    const before = await open(first.send);
    const [id] = await before.enqueue("run-1", [hook()], message, "/ws");
    await before.runDue();

    clock.advance(DAY);
    const second = scripted();
    const after = await open(second.send);
    expect(await after.enqueue("run-1", [hook()], message, "/ws")).toEqual([id]);
    await after.runDue();
    await expect(after.retry(id!)).rejects.toThrow(
      `delivery ${id} was acknowledged at ${clock.at(0)}; a delivered message is not sent again`,
    );
    expect(first.calls).toEqual([id]);
    expect(second.calls).toEqual([]);
    expect(after.list()).toEqual({ pending: [], dead: [] });
  });

  it("sends again, with the same id, a delivery whose acknowledgement a crash kept from being recorded", async () => {
    const received: string[] = [];
    let sent!: () => void;
    const reachedReceiver = new Promise<void>((resolve) => (sent = resolve));
    // The receiver has it; the process dies before the outbox hears back (let go only for the test's cleanup).
    let answer!: () => void;
    const neverAnswered = new Promise<void>((resolve) => (answer = resolve));
    const crashed = await open(async (entry) => {
      received.push(entry.id);
      sent();
      await neverAnswered;
    });
    try {
      crashed.start();
      const [id] = await crashed.enqueue("run-1", [hook()], message, "/ws");
      await reachedReceiver;

      const restarted = await open(async (entry) => void received.push(entry.id));
      expect(restarted.list().pending).toEqual([expect.objectContaining({ id, attempts: 1 })]);
      await restarted.runDue();
      expect(received).toEqual([id, id]);
      expect(restarted.deliveredAt(id!)).toBeDefined();
    } finally {
      answer();
    }
  });

  it("forgets delivered ids 7 days after delivery", async () => {
    const { calls, send } = scripted();
    const outbox = await open(send);
    const [id] = await outbox.enqueue("run-1", [hook()], message, "/ws");
    await outbox.runDue();

    clock.advance(7 * DAY - MINUTE);
    expect((await open(send)).deliveredAt(id!)).toBeDefined();

    clock.advance(2 * MINUTE);
    const later = await open(send);
    expect(later.deliveredAt(id!)).toBeUndefined();
    // Forgotten, so queueing the same run again is a new delivery.
    await later.enqueue("run-1", [hook()], message, "/ws");
    await later.runDue();
    expect(calls).toEqual([id, id]);
  });

  it("retries dead deliveries, one or all, and purges them", async () => {
    const { calls, send } = scripted(httpError(400), httpError(400), httpError(400));
    const outbox = await open(send);
    const [a] = await outbox.enqueue("run-a", [hook()], message, "/ws");
    const [b] = await outbox.enqueue("run-b", [hook()], message, "/ws");
    const [c] = await outbox.enqueue("run-c", [hook()], message, "/ws");
    await outbox.runDue();
    expect(outbox.list().dead.map((e) => e.id)).toEqual([a, b, c]);

    clock.advance(HOUR);
    expect(await outbox.retry(a!)).toBe(1);
    expect(outbox.list().pending).toEqual([expect.objectContaining({ id: a, attempts: 0, nextAttemptAt: clock.now().toISOString() })]);
    await outbox.runDue();
    expect(outbox.deliveredAt(a!)).toEqual(clock.now());

    expect(await outbox.retry("dead")).toBe(2);
    await outbox.stop();
    const reopened = await open(send);
    expect(reopened.list().pending.map((e) => e.id)).toEqual([b, c]);
    await reopened.runDue();
    expect(calls.slice(3, 4)).toEqual([a]);
    expect(calls.slice(4).sort()).toEqual([b!, c!].sort());

    const { send: refuse } = scripted(httpError(404), httpError(404));
    const other = await open(refuse);
    await other.enqueue("run-d", [hook(), mail], message, "/ws");
    await other.runDue();
    expect(await other.purge()).toBe(2);
    expect(other.list()).toEqual({ pending: [], dead: [] });
    expect((await open(send)).list()).toEqual({ pending: [], dead: [] });

    await expect(other.retry("nope")).rejects.toThrow(`no pending or dead delivery with id "nope" in ${join(dir, "outbox.jsonl")}`);
  });

  it("loses no delivery when many are queued at once, and queues the same run and target only once", async () => {
    const outbox = await open(scripted().send);
    const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => outbox.enqueue(`run-${i}`, [hook(), mail], message, "/ws")));
    await outbox.enqueue("run-7", [hook()], message, "/ws");

    const reopened = await open(scripted().send);
    expect(
      reopened
        .list()
        .pending.map((e) => e.id)
        .sort(),
    ).toEqual(ids.flat().sort());
    expect(reopened.list().pending).toHaveLength(100);
  });

  it("attempts at most 4 deliveries at a time, each delivery once", async () => {
    let inFlight = 0;
    let most = 0;
    const calls: string[] = [];
    let allSent!: () => void;
    const done = new Promise<void>((resolve) => (allSent = resolve));
    const outbox = await open(async (entry) => {
      calls.push(entry.id);
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setImmediate(resolve));
      inFlight--;
      if (calls.length === 10) allSent();
    });
    const ids = (await Promise.all(Array.from({ length: 10 }, (_, i) => outbox.enqueue(`run-${i}`, [hook()], message, "/ws")))).flat();
    outbox.start();
    await done;
    await outbox.stop();

    expect(most).toBe(4);
    expect(calls.sort()).toEqual(ids.sort());
  });

  it("end to end: a real receiver answering 500, 500, 200 gets three signed requests with one webhook-id and acknowledges one", async () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const receiver = await startWebhookReceiver({ secret, steps: [500, 500, 200] });
    try {
      const target: WebhookTarget = { kind: "webhook", url: receiver.url, secret, format: "json", headers: {} };
      const outbox = await open(async (entry) => {
        await sendWebhook(entry.target as WebhookTarget, entry.message, entry.id);
      });
      const [id] = await outbox.enqueue("run-1", [target], message, "/ws");
      await outbox.runDue();
      clock.advance(30 * SECOND);
      await outbox.runDue();
      clock.advance(2 * MINUTE);
      await outbox.runDue();

      expect(receiver.requests.map((r) => [r.headers["webhook-id"], r.status, r.verified])).toEqual([
        [id, 500, true],
        [id, 500, true],
        [id, 200, true],
      ]);
      expect(receiver.acknowledgedIds()).toEqual([id]);
      expect(JSON.parse(receiver.requests[2]!.body)).toMatchObject({ type: "run.completed", job: "daily-report", result: "All green." });
      expect(outbox.deliveredAt(id!)).toBeDefined();
    } finally {
      await receiver.close();
    }
  });
});
