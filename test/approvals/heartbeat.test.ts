import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, SLOW, startConsoleDaemon } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * countd.yaml's approve: covers the heartbeat too, whose check-in cannot wait for an answer (its
 * reply tool belongs to the run that asked): a call that needs a yes is refused there, never run
 * unasked, and the check-in still goes out.
 */

describe("approve: in countd.yaml and the heartbeat", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
  });
  afterEach(async () => {
    await daemons.cleanup();
    await receiver.close();
  });

  it("refuses a check-in's call that matches a rule, asks no one and still checks in", async () => {
    mock.addFixture({
      match: { userMessage: "Heartbeat check-in", hasToolResult: false },
      response: {
        toolCalls: [
          { name: "exec", arguments: JSON.stringify({ command: "touch pushed.txt" }) },
          { name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: "Water the plants." }) },
        ],
      },
    });
    mock.addFixture({ match: { userMessage: "Heartbeat check-in", hasToolResult: true }, response: { content: "Sent." } });
    const dir = await consoleFolder({
      extra: [
        "heartbeat:",
        "  enabled: true",
        "  every: 1h",
        '  active_hours: "00:00-00:00"',
        "  deliver:",
        `    - webhook: { url: "${receiver.url}" }`,
        "approve:",
        "  rules:",
        '    - exec: "touch *"',
        "  ask:",
        `    - webhook: { url: "${receiver.url}" }`,
        "",
      ].join("\n"),
    });
    await writeFile(join(dir, "workspace", "HEARTBEAT.md"), "- [ ] water the plants\n");
    const running = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-approval-heartbeat" });
    daemons.started.push(running);

    const fired = await running.api(`/api/jobs/${encodeURIComponent("@heartbeat")}/run`, { method: "POST" });
    expect(fired.status).toBeLessThan(300);
    await vi.waitFor(() => expect(receiver.requests).toHaveLength(1), SLOW);
    const body = JSON.parse(receiver.requests[0]!.body) as { type: string; result: string };
    expect(body).toMatchObject({ type: "heartbeat", result: expect.stringContaining("Water the plants.") });

    const results = mock
      .getRequests()
      .flatMap((request) => (request.body as { messages: Array<{ role: string; content: unknown }> }).messages)
      .filter((message) => message.role === "tool")
      .map((message) => String(message.content));
    expect(results.some((text) => text.includes("Error: not run, it needs a person's approval") && text.includes("touch *"))).toBe(true);
    const { approvals } = await running.get<{ approvals: unknown[] }>("/api/approvals");
    expect(approvals).toEqual([]);
    await expect(import("node:fs/promises").then((fs) => fs.access(join(dir, "workspace", "pushed.txt")))).rejects.toThrow();
  });
});
