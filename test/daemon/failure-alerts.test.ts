import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* The built daemon (dist/, `npm run build` first): a job failing every second, its on_failure hook. */

const SLOW = { timeout: 30_000, interval: 200 };

describe("on_failure of a job that fails every second", () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;
  let alerts: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-alerts-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(
      join(dir, "countd.yaml"),
      "provider:\n  attempts: 1\nrunner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n",
    );
    alerts = await startWebhookReceiver();
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await alerts.close();
    await rm(dir, { recursive: true, force: true });
  });

  const start = () => (daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-test" }));
  const stop = async () => {
    daemon!.child.kill("SIGTERM");
    expect(await daemon!.exited).toBe(0);
  };
  const job = (prompt: string) =>
    writeFile(
      join(dir, "jobs", "flaky.yaml"),
      `schedule: "* * * * * *"\nprompt: ${prompt}\non_failure:\n  - webhook: { url: "${alerts.url}" }\n`,
    );
  // A run cut short by SIGTERM counts as a failure too.
  const failedRuns = async () =>
    (await allRuns(join(dir, "state"))).filter((run) => !["ok", "skipped", "running"].includes(run.status)).length;
  const types = () => alerts.requests.map((r) => (JSON.parse(r.body) as { type: string }).type);

  it("reports the first failure once, across a restart, and the recovery once", async () => {
    mock.onMessage("break", { error: { message: "bad request", type: "invalid_request_error" }, status: 400 });
    mock.onMessage("work", { content: "fine again" });
    await job("break");
    start();
    await vi.waitFor(async () => expect(await failedRuns()).toBeGreaterThanOrEqual(4), SLOW);
    await stop();
    const beforeRestart = await failedRuns();

    start();
    await vi.waitFor(async () => expect(await failedRuns()).toBeGreaterThanOrEqual(beforeRestart + 2), SLOW);
    expect(types()).toEqual(["run.failed"]);

    await job("work");
    await vi.waitFor(() => expect(types()).toEqual(["run.failed", "run.recovered"]), SLOW);
    await stop();
    const recovered = JSON.parse(alerts.requests[1]!.body) as { failing: { failures: number; unreported: number } };
    expect(recovered.failing.failures).toBe(await failedRuns());
    expect(recovered.failing.unreported).toBe(recovered.failing.failures - 1);
    expect(types()).toEqual(["run.failed", "run.recovered"]);
  });
});
