import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { targetKey } from "../../src/delivery/targets.js";
import { OutboxStore } from "../../src/store/outbox-store.js";
import { useAimock } from "../support/aimock.js";
import { spawnDaemon, type DaemonProcess, logLines } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* The built daemon (dist/, `npm run build` first): a webhook gone with 410 and back again. */

const SLOW = { timeout: 20_000, interval: 200 };
const soon = () => `${new Date(Date.now() + 3_000).toISOString().slice(0, 19)}Z`;

describe("a webhook target disabled by HTTP 410", () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;
  let hooks: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-disabled-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    hooks = await startWebhookReceiver({ steps: [410] });
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await hooks.close();
    await rm(dir, { recursive: true, force: true });
  });

  const disabled = async () => Object.keys((await OutboxStore.read(join(dir, "state"), new Date())).disabledTargets);
  const job = (name: string) =>
    writeFile(join(dir, "jobs", `${name}.yaml`), `at: "${soon()}"\nprompt: say hi\ndeliver:\n  - webhook: { url: "${hooks.url}" }\n`);

  it("is sent to again after SIGHUP", async () => {
    mock.onMessage("say hi", { content: "hi" });
    const key = targetKey({ kind: "webhook", url: hooks.url, format: "json", headers: {} });
    await job("first");
    daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-test" });
    await vi.waitFor(async () => expect(await disabled()).toEqual([key]), SLOW);
    // The journal records the target disabled before the daemon's log line reaches this process's pipe.
    await vi.waitFor(
      () => expect(daemon!.output()).toContain("until its URL changes in the job file, SIGHUP, or `countd outbox retry`"),
      SLOW,
    );

    daemon.child.kill("SIGHUP");
    const enabledAgain = expect.objectContaining({
      msg: expect.stringContaining("delivery target enabled again"),
      target: key,
      why: "SIGHUP",
    });
    await vi.waitFor(() => expect(logLines(daemon!.output())).toContainEqual(enabledAgain), SLOW);
    expect(await disabled()).toEqual([]);

    await job("second");
    await vi.waitFor(() => expect(hooks.requests.map((r) => r.status)).toEqual([410, 200]), SLOW);
    expect(JSON.parse(hooks.requests[1]!.body)).toMatchObject({ job: "second", result: "hi" });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
  });
});
