import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/** countd.yaml with a mail server whose password only the daemon's environment holds. */
const CONFIG =
  'tools:\n  exec:\n    sandbox: none\nconsole: { listen: "127.0.0.1:0" }\nsmtp:\n  host: 127.0.0.1\n  port: 2525\n  user: countd\n  password: ${SMTP_PASSWORD}\n  from: countd@example.com\n';

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd outbox beside a running daemon", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  let receiver: WebhookReceiver | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    await receiver?.close();
    daemon = receiver = undefined;
  });

  async function setup() {
    mock.onMessage("notification", { content: "All systems normal." });
    // The first request is refused for good: the run's delivery goes dead.
    receiver = await startWebhookReceiver({ steps: [400] });
    const dir = await countdFolder({ notify: `prompt: Send the notification.\ndeliver:\n  - webhook: { url: '${receiver.url}' }\n` });
    await writeFile(join(dir, "countd.yaml"), CONFIG);
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, { ...env, SMTP_PASSWORD: "only-the-daemon-knows" });
    // The commands run without SMTP_PASSWORD: a webhook's retry needs no mail password.
    return countdIn(dir, env);
  }

  it("retry --dead sends a dead webhook delivery through the daemon, with SMTP_PASSWORD unset here", async () => {
    const countd = await setup();
    expect((await countd(["run", "notify"])).code).toBe(0);
    const [entry] = JSON.parse((await countd(["outbox", "--json"])).stdout) as Array<{ id: string; status: string }>;
    expect(entry).toMatchObject({ status: "dead" });

    const retried = await countd(["outbox", "retry", "--dead"]);
    expect(retried).toMatchObject({ code: 0, stderr: "" });
    expect(retried.stdout).toBe("1 queued again; the daemon sends it now (countd outbox shows what is left)\n");
    await receiver!.waitFor(2);
    await expect.poll(() => receiver!.acknowledgedIds(), { timeout: 10_000 }).toEqual([entry!.id]);
    await expect.poll(async () => (await countd(["outbox", "--json"])).stdout, { timeout: 10_000 }).toBe("[]\n");
  });

  it("purge removes the dead deliveries through the daemon", async () => {
    const countd = await setup();
    expect((await countd(["run", "notify"])).code).toBe(0);
    expect(JSON.parse((await countd(["outbox", "--json"])).stdout)).toEqual([expect.objectContaining({ status: "dead" })]);

    const purged = await countd(["outbox", "purge"]);
    expect(purged).toMatchObject({ code: 0, stderr: "", stdout: "1 dead delivery removed\n" });
    expect((await countd(["outbox", "--json"])).stdout).toBe("[]\n");
    expect(daemon!.child.exitCode).toBeNull();
  });
});
