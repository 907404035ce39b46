import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, SLOW, startConsoleDaemon, type ConsoleDaemon } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The heartbeat as a job of the running daemon: a reload of countd.yaml changes how often it
 * checks in at once, and the console lists it like any job.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the heartbeat as the daemon's built-in job", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let receiver: WebhookReceiver;
  let dir: string;
  let env: Record<string, string>;

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-heartbeat-reload-test" };
    mock.addFixture({
      match: { userMessage: "Heartbeat check-in", hasToolResult: false },
      response: { toolCalls: [{ name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: "Water the plants." }) }] },
    });
    mock.addFixture({ match: { userMessage: "Heartbeat check-in", hasToolResult: true }, response: { content: "Sent." } });
  });
  afterEach(async () => {
    await daemons.cleanup();
    await receiver.close();
  });

  /** A heartbeat with an open item, asked every `every` all day, never held back by the idle threshold or the daily cap. */
  const heartbeat = (every: string, enabled = true) =>
    [
      "heartbeat:",
      `  enabled: ${enabled}`,
      `  every: ${every}`,
      '  active_hours: "00:00-00:00"',
      "  idle_threshold: 0s",
      "  max_per_day: 1000",
      "  deliver:",
      `    - webhook: { url: "${receiver.url}" }`,
      "",
    ].join("\n");

  async function start(every: string): Promise<ConsoleDaemon> {
    dir = await consoleFolder({ extra: heartbeat(every) });
    await writeFile(join(dir, "workspace", "HEARTBEAT.md"), "- [ ] water the plants\n");
    const running = await startConsoleDaemon(dir, env);
    daemons.started.push(running);
    return running;
  }

  /** The count of LLM requests once no check-in is in progress: a run under way finishes its second call. */
  async function settledRequests(running: ConsoleDaemon): Promise<number> {
    await vi.waitFor(() => expect(running.daemon.runner.running()).toEqual([]), SLOW);
    await sleep(300);
    return mock.getRequests().length;
  }

  it.each<[string, string, boolean]>([
    ["heartbeat.every from 1s to 1h", "1h", true],
    ["heartbeat.enabled: false", "1s", false],
  ])(
    "a reload after changing %s stops the check-ins at once",
    async (_what, every, enabled) => {
      const running = await start("1s");
      await vi.waitFor(() => expect(mock.getRequests().length).toBeGreaterThanOrEqual(4), SLOW);

      const file = join(dir, "countd.yaml");
      await writeFile(file, (await readFile(file, "utf8")).replace(/^heartbeat:[\s\S]*$/m, heartbeat(every, enabled)));
      await running.daemon.reload();
      const after = await settledRequests(running);
      await sleep(3_000);

      expect(mock.getRequests()).toHaveLength(after);
    },
    30_000,
  );

  it("lists @heartbeat in the console with its next check-in, and answers its job page", async () => {
    const running = await start("1h");
    const next = new Date(Math.ceil((Date.now() + 1) / 3_600_000) * 3_600_000).toISOString();

    const { jobs } = await running.get<{ jobs: Array<{ name: string; next_fires: string[] }> }>("/api/jobs");
    expect(jobs.find((job) => job.name === "@heartbeat")).toMatchObject({ name: "@heartbeat", next_fires: [next] });
    const status = await running.get<{ next_fires: Array<{ job: string; at: string }> }>("/api/status");
    expect(status.next_fires).toContainEqual({ job: "@heartbeat", at: next });
    expect(await running.get(`/api/jobs/${encodeURIComponent("@heartbeat")}`)).toMatchObject({ name: "@heartbeat", next_fires: [next] });
  });
});
