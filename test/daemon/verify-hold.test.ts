import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { consoleFolder, daemonsOf, endedRun, SLOW, startConsoleDaemon, writeJob } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* on_verify_fail: hold in the daemon: held through a restart, counted in /metrics, released once from the console's API. */
describe("a held delivery in the daemon", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let hook: WebhookReceiver | undefined;
  afterEach(async () => {
    await daemons.cleanup();
    await hook?.close();
  });

  it("is not sent, survives a restart, is counted as a failed check, and POST /api/outbox/:id/release sends it exactly once", async () => {
    hook = await startWebhookReceiver();
    const dir = await consoleFolder();
    await writeJob(
      dir,
      "numbers",
      `prompt: Report the numbers.\ndeliver:\n  - webhook: { url: "${hook.url}" }\nverify:\n  - expect: "$.count >= 3"\non_verify_fail: hold\n`,
    );
    mock.onMessage("Report the numbers", { content: '{"count": 1}' });
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-hold-test" };
    const first = await startConsoleDaemon(dir, env);
    daemons.started.push(first);

    const { body } = await first.post(`/api/jobs/numbers/run`);
    expect(await endedRun(first, body.run_id, "numbers")).toMatchObject({ status: "ok" });
    const { pending } = await first.get<{ pending: Array<{ id: string; held?: string }> }>("/api/outbox");
    expect(pending).toEqual([expect.objectContaining({ held: "failed checks: expect $.count >= 3: $.count is 1" })]);
    const id = pending[0]!.id;
    const metrics = await (await first.api("/metrics")).text();
    expect(metrics).toContain('countd_verify_failures_total{job_name="numbers",check="expect"} 1');
    const run = await first.get<{ transcript: { steps: Array<{ kind: string }> } }>(`/api/runs/${body.run_id}?job=numbers`);
    expect(run.transcript.steps).toContainEqual({
      kind: "verify",
      index: 0,
      check: "expect",
      what: "$.count >= 3",
      passed: false,
      reason: "$.count is 1",
    });

    await first.stop();
    const second = await startConsoleDaemon(dir, env);
    daemons.started.push(second);
    // Long enough for a due delivery to have been sent at the start.
    await sleep(1_000);
    expect(hook.requests).toHaveLength(0);
    expect((await second.get<{ pending: Array<{ id: string; held?: string }> }>("/api/outbox")).pending).toEqual([
      expect.objectContaining({ id, held: expect.stringContaining("failed checks") }),
    ]);

    expect(await second.post(`/api/outbox/${encodeURIComponent(id)}/release`)).toEqual({ status: 200, body: { id, released: true } });
    await hook.waitFor(1);
    await expect.poll(() => hook!.acknowledgedIds(), SLOW).toEqual([id]);
    const again = await second.post(`/api/outbox/${encodeURIComponent(id)}/release`);
    expect(again.status).toBe(409);
    await sleep(500);
    expect(hook.requests).toHaveLength(1);
  }, 60_000);
});

describe("countd run beside a daemon, for a job whose checks hold its deliveries", { timeout: 60_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  let hook: WebhookReceiver | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    await hook?.close();
  });

  it("ends once the deliveries are held, and says how to release each", async () => {
    hook = await startWebhookReceiver();
    mock.onMessage("Report the numbers", { content: "Numbers are in." });
    const dir = await countdFolder({
      numbers: `prompt: Report the numbers.\ndeliver:\n  - webhook: { url: "${hook.url}" }\nverify:\n  - expect: $.count\non_verify_fail: hold\n`,
    });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    const run = await countdIn(dir, env)(["run", "numbers"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/countd: deliveries: held: json webhook at /);
    expect(run.stderr).toMatch(/countd: held until released: countd outbox release numbers\.\S+\n/);
    expect(hook.requests).toHaveLength(0);
  });
});
