import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { simpleParser } from "mailparser";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { message } from "../../src/delivery/dispatch.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { targetKey } from "../../src/delivery/targets.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver, type ReceivedRequest, type ReceiverStep, type WebhookReceiver } from "../support/webhook-receiver.js";

/* The built daemon (dist/, `npm run build` first) delivering to real peers on loopback. */

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SLOW = { timeout: 20_000, interval: 200 };

/** A one-shot `at` a few seconds ahead (a start slower than that still runs it, as a catch-up). */
const soon = () => `${new Date(Date.now() + 3_000).toISOString().slice(0, 19)}Z`;

/** The webhook target as a job file gives it; the delivery id ends in its key. */
const hookTarget = (url: string) => ({ kind: "webhook" as const, url, secret: "${HOOK_SECRET}", format: "json" as const, headers: {} });
const hookYaml = (url: string) => `  - webhook:\n      url: ${url}\n      secret: \${HOOK_SECRET}\n`;

const body = (request: ReceivedRequest) => JSON.parse(request.body) as Record<string, unknown> & { run: { id: string } };

describe("countd start delivering runs", () => {
  const mock = useAimock();
  let dir: string;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];
  const receivers: WebhookReceiver[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-delivery-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(
      join(dir, "countd.yaml"),
      "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\njob_env: [HOOK_SECRET]\n",
    );
    env = {
      PATH: process.env["PATH"] ?? "",
      OPENAI_BASE_URL: `${mock.url}/v1`,
      OPENAI_API_KEY: "sk-daemon-test-key",
      HOOK_SECRET: SECRET,
    };
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
    await rm(dir, { recursive: true, force: true });
  });

  function startDaemon(): DaemonProcess {
    const daemon = spawnDaemon(dir, env);
    daemons.push(daemon);
    return daemon;
  }

  async function receiver(steps: ReceiverStep[] = []): Promise<WebhookReceiver> {
    const started = await startWebhookReceiver({ secret: SECRET, steps });
    receivers.push(started);
    return started;
  }

  async function runs(job: string): Promise<readonly RunRecord[]> {
    return (await StateStore.open(join(dir, "state"))).runs(job);
  }

  async function finishedRun(job: string): Promise<RunRecord> {
    let run: RunRecord | undefined;
    await vi.waitFor(async () => {
      run = (await runs(job)).find((r) => r.status !== "running");
      expect(run).toBeDefined();
    }, SLOW);
    return run!;
  }

  it("deliver_when: non_empty sends nothing for NO_REPLY and a real answer once, signed, with the run's fields", async () => {
    mock.onMessage("anything to report?", { content: "NO_REPLY" });
    mock.onMessage("write the daily report", {
      content: "All 3 orders shipped.",
      usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 },
    });
    const hooks = await receiver();
    const at = soon();
    for (const [job, prompt] of [
      ["quiet", "anything to report?"],
      ["report", "write the daily report"],
    ]) {
      await writeFile(
        join(dir, "jobs", `${job}.yaml`),
        `at: "${at}"\nprompt: ${prompt}\ndeliver_when: non_empty\ndeliver:\n${hookYaml(hooks.url)}`,
      );
    }
    const daemon = startDaemon();

    const quiet = await finishedRun("quiet");
    const report = await finishedRun("report");
    expect([quiet.status, report.status]).toEqual(["ok", "ok"]);
    await vi.waitFor(() => expect(hooks.acknowledgedIds()).toHaveLength(1), SLOW);
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);

    const key = targetKey(hookTarget(hooks.url));
    expect(hooks.requests).toHaveLength(1);
    const [request] = hooks.requests;
    expect(request!.verified).toBe(true);
    expect(request!.headers["webhook-id"]).toBe(`report.${report.id}.${key}`);
    expect(body(request!)).toEqual({
      type: "run.completed",
      job: "report",
      run: {
        id: report.id,
        reason: report.reason,
        status: "ok",
        startedAt: report.startedAt,
        finishedAt: report.finishedAt,
        durationMs: Date.parse(report.finishedAt!) - Date.parse(report.startedAt),
        usage: report.usage,
        cost: report.cost,
      },
      result: "All 3 orders shipped.",
    });
    expect(report.usage).toMatchObject({ inputTokens: 11, outputTokens: 5 });
    // gpt-4o-mini, priced from the bundled table.
    expect(report.cost).toBeGreaterThan(0);

    // The quiet run's answer was not queued at all, so nothing of it waits to be sent after a restart.
    const outbox = await Outbox.open({ stateDir: join(dir, "state"), send: () => Promise.reject(new Error("not sending")) });
    expect(outbox.list()).toEqual({ pending: [], dead: [] });
    expect(outbox.deliveredAt(`quiet.${quiet.id}.${key}`)).toBeUndefined();
    expect(outbox.deliveredAt(`report.${report.id}.${key}`)).toBeDefined();
  });

  it("reports a run that failed on an LLM error to on_failure as run.failed with the error, and delivers no answer", async () => {
    mock.onMessage("summarise the inbox", { error: { message: "context too long", type: "invalid_request_error" }, status: 400 });
    const hooks = await receiver();
    const failures = await receiver();
    await writeFile(
      join(dir, "jobs", "inbox.yaml"),
      `at: "${soon()}"\nprompt: summarise the inbox\ndeliver:\n${hookYaml(hooks.url)}on_failure:\n${hookYaml(failures.url)}`,
    );
    startDaemon();

    const run = await finishedRun("inbox");
    expect(run).toMatchObject({ status: "error", error: expect.stringContaining("context too long") });
    await vi.waitFor(() => expect(failures.acknowledgedIds()).toHaveLength(1), SLOW);

    const [request] = failures.requests;
    expect(request!.verified).toBe(true);
    expect(request!.headers["webhook-id"]).toBe(`inbox.${run.id}.${targetKey(hookTarget(failures.url))}`);
    expect(body(request!)).toMatchObject({
      type: "run.failed",
      job: "inbox",
      run: { id: run.id, status: "error", startedAt: run.startedAt, finishedAt: run.finishedAt },
      error: run.error,
      lastToolCalls: [],
    });
    expect(hooks.requests).toEqual([]);
  });

  it("names the run's page in the console in a failure alert, when the console is on", async () => {
    mock.onMessage("summarise the outbox", { error: { message: "context too long", type: "invalid_request_error" }, status: 400 });
    await writeFile(
      join(dir, "jobs", "outbox.yaml"),
      `at: "${soon()}"\nprompt: summarise the outbox\non_failure:\n  - email: { to: [ops@example.com] }\n`,
    );
    startDaemon();

    const run = await finishedRun("outbox");
    const folder = join(dir, "state", "mail");
    let files: string[] = [];
    await vi.waitFor(async () => {
      files = (await readdir(folder).catch(() => [])).filter((name) => name.endsWith(".eml"));
      expect(files).toHaveLength(1);
    }, SLOW);
    const { url } = JSON.parse(await readFile(join(dir, "state", "console.json"), "utf8")) as { url: string };
    const mail = await simpleParser(await readFile(join(folder, files[0]!)));
    const page = `${url}#/runs/outbox/${run.id}`;
    expect(mail.text).toContain(`See the whole run with \`countd show ${run.id} --job outbox\`, or open <${page}>`);
    expect(mail.html).toContain(`<a href="${page}">`);
  });

  it("without smtp: settings writes the mail as an .eml file under state/mail, Message-ID from the delivery id", async () => {
    mock.onMessage("write the daily report", { content: "# Orders\n\nAll 3 shipped." });
    await writeFile(
      join(dir, "jobs", "mailer.yaml"),
      `at: "${soon()}"\nprompt: write the daily report\ndeliver:\n  - email:\n      to: [ops@example.com]\n      subject: "Report {{job.name}} {{status}}"\n`,
    );
    const daemon = startDaemon();

    const run = await finishedRun("mailer");
    const folder = join(dir, "state", "mail");
    let files: string[] = [];
    await vi.waitFor(async () => {
      files = (await readdir(folder).catch(() => [])).filter((name) => name.endsWith(".eml"));
      expect(files).toHaveLength(1);
    }, SLOW);

    const id = files[0]!.slice(0, -".eml".length);
    expect(id).toMatch(new RegExp(`^mailer\\.${run.id}\\.email-`));
    const mail = await simpleParser(await readFile(join(folder, files[0]!)));
    expect(mail.messageId).toBe(`<${id}@countd>`);
    expect(mail.subject).toBe("Report mailer ok");
    expect(mail.to).toMatchObject({ text: "ops@example.com" });
    expect(mail.html).toContain("<h1>Orders</h1>");
    expect(mail.text).toContain("All 3 shipped.");
    expect(mail.headers.get("x-countd-run")).toBe(run.id);
    expect(daemon.output()).toContain("no smtp settings: mail is written as .eml files, not sent");
  });

  it("at a restart reports an interrupted run to on_failure, unless its answer was queued before the crash", async () => {
    const answers = await receiver();
    const failures = await receiver();
    await writeFile(
      join(dir, "jobs", "ticker.yaml"),
      `enabled: false\nprompt: tick\ndeliver:\n${hookYaml(answers.url)}on_failure:\n${hookYaml(failures.url)}`,
    );
    // Two runs a crash left running, written by countd's own stores: the first had got as far as
    // queueing its answer (the crash came before its end was recorded), the second had not.
    const stateDir = join(dir, "state");
    const running = (id: string): RunRecord => ({
      id,
      job: "ticker",
      reason: "schedule",
      scheduledAt: "2026-12-01T08:00:00.000Z",
      startedAt: "2026-12-01T08:00:00.100Z",
      status: "running",
      iterations: 1,
      toolCalls: 0,
      usage: emptyUsage(),
      sessionId: `cron:ticker:${id}`,
    });
    const [queued, unqueued] = [running("20261201T080000Z-aaaa"), running("20261201T080000Z-bbbb")];
    const state = await StateStore.open(stateDir);
    await Promise.all([state.saveRun(queued), state.saveRun(unqueued)]);
    const outbox = await Outbox.open({ stateDir, send: () => Promise.reject(new Error("not sending")) });
    await outbox.enqueue(
      `ticker.${queued.id}`,
      [hookTarget(answers.url)],
      message("run.completed", "ticker", queued, "tock"),
      join(dir, "workspace"),
    );

    const daemon = startDaemon();
    await Promise.all([answers.waitFor(1), failures.waitFor(1)]);
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);

    expect((await runs("ticker")).map((r) => [r.id, r.status])).toEqual([
      [queued.id, "interrupted"],
      [unqueued.id, "interrupted"],
    ]);
    expect(answers.requests.map((r) => [body(r).type, body(r).run.id])).toEqual([["run.completed", queued.id]]);
    expect(failures.requests.map((r) => [body(r).type, body(r).run.id])).toEqual([["run.failed", unqueued.id]]);
    const left = (await Outbox.open({ stateDir, send: () => Promise.reject(new Error("not sending")) })).list();
    expect(left).toEqual({ pending: [], dead: [] });
  });

  it("after SIGKILL with deliveries pending, a restart delivers every completed run's answer, none acknowledged twice", async () => {
    mock.onMessage("tick", { content: "tock" });
    // The first four requests are never answered: with the outbox's four attempts at a time, every
    // later delivery waits on disk behind them, and nothing is acknowledged before the kill.
    const hooks = await receiver(["hang", "hang", "hang", "hang"]);
    const jobFile = join(dir, "jobs", "ticker.yaml");
    await writeFile(jobFile, `schedule: "* * * * * *"\nprompt: tick\ndeliver:\n${hookYaml(hooks.url)}`);
    const crashed = startDaemon();

    await vi.waitFor(async () => {
      expect(hooks.requests).toHaveLength(4);
      expect((await runs("ticker")).filter((r) => r.status === "ok").length).toBeGreaterThanOrEqual(6);
    }, SLOW);
    crashed.child.kill("SIGKILL");
    await crashed.exited;
    expect(hooks.acknowledgedIds()).toEqual([]);
    const hung = hooks.requests.map((r) => String(r.headers["webhook-id"]));

    // The job stops firing, so the runs to deliver are the ones completed before the kill.
    await writeFile(jobFile, `enabled: false\nprompt: tick\ndeliver:\n${hookYaml(hooks.url)}`);
    const completed = (await runs("ticker")).filter((r) => r.status === "ok");
    const key = targetKey(hookTarget(hooks.url));
    const expected = completed.map((r) => `ticker.${r.id}.${key}`).sort();
    const left = (await Outbox.open({ stateDir: join(dir, "state"), send: () => Promise.reject(new Error("not sending")) })).list();
    expect(left.dead).toEqual([]);
    expect(left.pending.map((entry) => entry.id)).toEqual(expect.arrayContaining(expected));
    expect(
      left.pending
        .filter((entry) => entry.attempts === 1)
        .map((entry) => entry.id)
        .sort(),
    ).toEqual([...hung].sort());
    const queuedAtKill = left.pending.map((entry) => entry.id);
    startDaemon();

    await vi.waitFor(() => expect(hooks.acknowledgedIds()).toEqual(expect.arrayContaining(expected)), SLOW);
    const acknowledged = hooks.acknowledgedIds();
    // Beyond those, exactly the runs the kill caught after their delivery was queued and before
    // their end was recorded: interrupted, yet their answer is sent.
    const interrupted = (await runs("ticker")).filter((r) => r.status === "interrupted").map((r) => `ticker.${r.id}.${key}`);
    expect(acknowledged.filter((id) => !expected.includes(id)).sort()).toEqual(
      interrupted.filter((id) => queuedAtKill.includes(id)).sort(),
    );
    expect(new Set(acknowledged).size).toBe(acknowledged.length);
    expect(hung.every((id) => acknowledged.includes(id))).toBe(true);
    // A request repeating an id is a resend of an attempt the receiver never acknowledged.
    hooks.requests.forEach((request, index) => {
      const earlier = hooks.requests.slice(0, index).filter((r) => r.headers["webhook-id"] === request.headers["webhook-id"]);
      expect(earlier.filter((r) => r.status !== undefined && r.status < 300)).toEqual([]);
    });
    expect(hooks.requests.every((r) => r.verified)).toBe(true);
    for (const request of hooks.requests) {
      expect(request.headers["webhook-id"]).toBe(`ticker.${body(request).run.id}.${key}`);
    }
  });
});
