import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { stateStreaks } from "../../src/delivery/alerts.js";
import { RunDispatcher, sendEntry } from "../../src/delivery/dispatch.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { captureLog, type LogLine } from "../support/log-capture.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * on_failure throttling through the dispatcher the daemon uses, its outbox and job state on disk,
 * to a real receiver: the first failure, at most one "still failing" per on_failure_repeat, one
 * "recovered".
 */

const T0 = Date.parse("2026-03-02T08:00:00.000Z");
const SECOND = 1000;
const HOUR = 3_600_000;

let dir: string;
let receiver: WebhookReceiver;
let mailer: Mailer;
let stage: { outbox: Outbox; dispatcher: RunDispatcher; logs: LogLine[] };
let t: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-alerts-"));
  receiver = await startWebhookReceiver();
  mailer = createMailer({ stateDir: dir, timezone: "UTC" });
  t = T0;
  stage = await open();
});
afterEach(async () => {
  await stage.outbox.stop();
  mailer.close();
  await receiver.close();
  await rm(dir, { recursive: true, force: true });
});

/** Everything as a fresh daemon start would have it, from the files in `dir`. */
async function open() {
  const { log, lines: logs } = captureLog();
  const outbox = await Outbox.open({ stateDir: dir, send: sendEntry(mailer, {}), now: () => new Date(t) });
  const state = await StateStore.open(dir);
  return { outbox, dispatcher: new RunDispatcher(outbox, () => join(dir, "workspace"), stateStreaks(state), log), logs };
}

const job = (extra: Partial<Job> = {}): Job => ({
  name: "flaky",
  file: join(dir, "flaky.yaml"),
  timezone: "UTC",
  prompt: "check",
  ...jobDefaults(),
  schedule: { kind: "every", intervalMs: 5 * SECOND },
  timeoutMs: 60_000,
  catchUpMs: 0,
  retry: { attempts: 1, backoffMs: 0 },
  deliver: [{ kind: "webhook", url: `${receiver.url}/answers`, format: "json", headers: {} }],
  deliverWhen: "always",
  onFailure: [{ kind: "webhook", url: `${receiver.url}/alerts`, format: "json", headers: {} }],
  onFailureRepeatMs: HOUR,
  ...extra,
});

let serial = 0;
/** One run of `job` ending at `t` with `status`, through the dispatcher and out of the outbox. */
async function runEnds(status: RunRecord["status"], target: Job = job()): Promise<RunRecord> {
  const id = `run-${String(++serial).padStart(3, "0")}`;
  const run: RunRecord = {
    id,
    job: target.name,
    reason: "schedule",
    scheduledAt: new Date(t - SECOND).toISOString(),
    startedAt: new Date(t - SECOND).toISOString(),
    finishedAt: new Date(t).toISOString(),
    status,
    iterations: 1,
    toolCalls: 0,
    usage: emptyUsage(),
    ...(status === "ok" ? {} : { error: "provider answered HTTP 500" }),
    sessionId: `cron:${target.name}:${id}`,
  };
  await stage.dispatcher.finished(target, run, { answer: status === "ok" ? "all good" : "" }, false);
  await stage.outbox.runDue();
  return run;
}

/** What the receiver got, per path: type, run id and the failing summary. */
const received = () =>
  receiver.requests.map((r) => {
    const body = JSON.parse(r.body) as { type: string; run: { id: string }; failing?: unknown };
    return [r.url, body.type, body.run.id, body.failing];
  });

describe("on_failure for a job that keeps failing", () => {
  it("a failure every 5 s: the first is reported, then one 'still failing' an hour after it, one 'recovered' at the next success", async () => {
    const failures: RunRecord[] = [];
    for (let i = 0; i < 5; i++) {
      failures.push(await runEnds("error"));
      t += 5 * SECOND;
    }
    expect(received()).toEqual([["/hook/alerts", "run.failed", failures[0]!.id, undefined]]);
    expect(stage.logs.filter((line) => line.msg === "job failed again; on_failure is told again later").map((line) => line.fields)).toEqual(
      [2, 3, 4, 5].map((n, i) => ({
        component: "dispatch",
        job: "flaky",
        runId: failures[i + 1]!.id,
        failures: n,
        since: "2026-03-02T08:00:00.000Z",
        reportAgainFrom: "2026-03-02T09:00:00.000Z",
      })),
    );

    t = T0 + HOUR;
    const still = await runEnds("error");
    t += 5 * SECOND;
    await runEnds("error");
    t += 5 * SECOND;
    const ok = await runEnds("ok");
    expect(received()).toEqual([
      ["/hook/alerts", "run.failed", failures[0]!.id, undefined],
      ["/hook/alerts", "run.failed", still.id, { since: "2026-03-02T08:00:00.000Z", failures: 6, unreported: 4 }],
      ["/hook/alerts", "run.recovered", ok.id, { since: "2026-03-02T08:00:00.000Z", failures: 7, unreported: 1 }],
      ["/hook/answers", "run.completed", ok.id, undefined],
    ]);

    // A success with no failing streak says nothing to on_failure; the next failure is a first one again.
    t += 5 * SECOND;
    await runEnds("ok");
    t += 5 * SECOND;
    const again = await runEnds("timeout");
    expect(received().slice(4)).toEqual([
      ["/hook/answers", "run.completed", `run-${String(serial - 1).padStart(3, "0")}`, undefined],
      ["/hook/alerts", "run.failed", again.id, undefined],
    ]);
  });

  it("the throttle survives a restart: it lives in state.json with the job's state", async () => {
    const first = await runEnds("error");
    await stage.outbox.stop();
    expect(JSON.parse(await readFile(join(dir, "state.json"), "utf8")).jobs.flaky.failing).toEqual({
      since: "2026-03-02T08:00:00.000Z",
      failures: 1,
      reportedAt: "2026-03-02T08:00:00.000Z",
      unreported: 0,
    });

    stage = await open();
    t += 30 * SECOND;
    await runEnds("error");
    t = T0 + HOUR + SECOND;
    const still = await runEnds("error");
    expect(received()).toEqual([
      ["/hook/alerts", "run.failed", first.id, undefined],
      ["/hook/alerts", "run.failed", still.id, { since: "2026-03-02T08:00:00.000Z", failures: 3, unreported: 1 }],
    ]);
  });

  it("on_failure_repeat sets the interval, and a recovery also reaches a target that is in deliver too", async () => {
    const shared = [{ kind: "webhook" as const, url: `${receiver.url}/both`, format: "json" as const, headers: {} }];
    const quick = job({ onFailureRepeatMs: 10 * SECOND, deliver: shared, onFailure: shared });
    const runs: RunRecord[] = [];
    for (let i = 0; i < 4; i++) {
      runs.push(await runEnds("error", quick));
      t += 5 * SECOND;
    }
    runs.push(await runEnds("ok", quick));
    expect(received()).toEqual([
      ["/hook/both", "run.failed", runs[0]!.id, undefined],
      ["/hook/both", "run.failed", runs[2]!.id, { since: "2026-03-02T08:00:00.000Z", failures: 3, unreported: 1 }],
      ["/hook/both", "run.recovered", runs[4]!.id, { since: "2026-03-02T08:00:00.000Z", failures: 4, unreported: 1 }],
      ["/hook/both", "run.completed", runs[4]!.id, undefined],
    ]);
  });

  it("the 'still failing' and 'recovered' messages say so in a chat format, since when in the job's zone", async () => {
    const slack = job({
      timezone: "America/New_York",
      onFailure: [{ kind: "webhook", url: `${receiver.url}/slack`, format: "slack", headers: {} }],
      deliver: [],
    });
    const first = await runEnds("error", slack);
    t = T0 + HOUR;
    const still = await runEnds("error", slack);
    t += SECOND;
    const ok = await runEnds("ok", slack);
    const texts = receiver.requests.map((r) => (JSON.parse(r.body) as { text: string }).text.split("\n\n").slice(0, 2).join("\n\n"));
    expect(texts).toEqual([
      `*flaky: failed (error)*\n\n*Run ${first.id} error.*`,
      "*flaky: still failing (error)*\n\n*Still failing: 2 failed runs since 2026-03-02 03:00:00 -05:00.*",
      `*flaky: recovered*\n\n*Run ${ok.id} ok after 2 failed runs since 2026-03-02 03:00:00 -05:00.*`,
    ]);
    expect(JSON.parse(receiver.requests[1]!.body).text).toContain(`*Run ${still.id} error.*`);
  });
});
