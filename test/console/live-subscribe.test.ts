import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { useAimock } from "../support/aimock.js";
import {
  consoleFolder,
  daemonsOf,
  gate,
  openLive,
  SLOW,
  startConsoleDaemon,
  writeJob,
  type ConsoleDaemon,
  type LiveClient,
} from "../support/console-daemon.js";

/*
 * Subscribe messages against a real daemon whose run in progress has a large replay: a flood of
 * them from one client must not stall the daemon, and a page's ordinary subscribe still gets the
 * replay.
 */

/** One tool result of this size is kept whole (LIVE_RESULT_CHARS cuts at 16,000). */
const BIG = "x".repeat(15_000);
/** Under the run's cap of 25 tool calls: a replay of about 300 KB. */
const READS = 20;

describe("subscribe messages on the live stream", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  const gates: Array<() => void> = [];
  const clients: LiveClient[] = [];
  let console: ConsoleDaemon;
  let runId: string;

  beforeEach(async () => {
    const dir = await consoleFolder();
    await writeFile(join(dir, "workspace", "big.txt"), BIG);
    // The same read many times over is what makes the replay large; the breaker would end it.
    await writeJob(dir, "reader", "prompt: read the big file\nbreaker: false\n");
    console = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-console-subscribe-test-key" });
    daemons.started.push(console);
    // The run reads the file READS times, then waits for the test.
    const second = gate();
    gates.push(second.open);
    mock.onMessage("read the big file", async (request: ChatCompletionRequest): Promise<FixtureResponse> => {
      if (!request.messages.some((message) => message.role === "tool")) {
        return { toolCalls: Array.from({ length: READS }, () => ({ name: "read_file", arguments: JSON.stringify({ path: "big.txt" }) })) };
      }
      await second.wait;
      return { content: "done" };
    });
    const watcher = await connect();
    runId = (await console.post("/api/jobs/reader/run")).body.run_id as string;
    await watcher.next((m) => m.type === "iteration" && m.iteration === 2, "the run waiting at its second call");
  }, 40_000);
  afterEach(async () => {
    gates.splice(0).forEach((open) => open());
    clients.splice(0).forEach((client) => client.close());
    await daemons.cleanup();
  });

  async function connect(query = ""): Promise<LiveClient> {
    const opened = await openLive(`ws://${console.host}/api/ws${query}`, { headers: { authorization: `Bearer ${console.token}` } });
    if (!opened.ok) throw new Error(`WebSocket refused: ${opened.status ?? opened.error}`);
    clients.push(opened.client);
    await opened.client.next((message) => message.type === "live", "live");
    return opened.client;
  }

  // How long the burst stalls the event loop is measured by `npm run bench -- console` (e), not timed here.
  it("a burst of 10,000 subscribes from one client: the daemon goes on answering and drops the client", { timeout: 60_000 }, async () => {
    // A client that reads what it is sent without parsing it: the cost measured is the daemon's.
    const flood = new WebSocket(`ws://${console.host}/api/ws`, { headers: { authorization: `Bearer ${console.token}` } });
    let received = 0;
    flood.on("message", (data: Buffer) => (received += data.length));
    await new Promise((resolve, reject) => flood.once("open", resolve).once("error", reject));
    const closed = new Promise<number>((resolve) => flood.once("close", (code) => resolve(code)));

    const burst = Array.from({ length: 10_000 }, (_, i) => JSON.stringify({ type: "subscribe", ...(i % 2 ? { run: runId } : {}) }));
    expect(burst.join("").length).toBeLessThan(400_000);
    for (const message of burst) flood.send(message);
    const code = await closed;
    // The loop keeps turning while the daemon answers: a status request is answered at once.
    expect((await console.api("/api/status")).status).toBe(200);

    // Past the rate the client is told why and dropped, having been sent a few replays at most.
    expect(code).toBe(1008);
    expect(received).toBeLessThan(20 * 400_000);
  });

  it("an ordinary subscribe still gets the run's replay, and a page's next one too", async () => {
    const page = await connect("?job=nothing");
    for (const filter of [{ run: runId }, { job: "reader" }, { job: "reader" }]) {
      page.messages.length = 0;
      page.ws.send(JSON.stringify({ type: "subscribe", ...filter }));
      await page.next((m) => m.type === "live", "live after subscribing");
      expect(page.messages[0]).toEqual({ type: "replay" });
      expect(page.messages[1]).toMatchObject({ type: "run_started", run_id: runId });
      expect(page.messages.filter((m) => m.type === "tool_result")).toHaveLength(READS);
    }
  });

  it("ten subscribes a second, second after second, are all answered", { timeout: 30_000 }, async () => {
    const page = await connect();
    let closed = false;
    page.ws.on("close", () => (closed = true));
    for (let second = 0; second < 3; second++) {
      page.messages.length = 0;
      for (let i = 0; i < 10; i++) page.ws.send(JSON.stringify({ type: "subscribe", job: "reader" }));
      await vi.waitFor(() => expect(page.messages.filter((m) => m.type === "live")).toHaveLength(10), SLOW);
      await new Promise((resolve) => setTimeout(resolve, 1_050));
    }
    expect(closed).toBe(false);
  });
});
