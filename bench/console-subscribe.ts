/**
 * A flood of subscribe messages on the live stream (test/console/live-subscribe.test.ts asserts
 * what the client is told; this measures what it costs): a daemon started in this process, whose
 * run in progress has a replay of about 300 KB, gets 10,000 subscribes from one WebSocket client.
 * The event loop's longest stall from the first send until the client is dropped and a status
 * request is answered is what every other client and timer of the daemon waits through. The
 * client shares the loop, as a page in the same process would; its sends are part of the figure.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { LLMock, type ChatCompletionRequest, type FixtureResponse } from "@copilotkit/aimock";
import WebSocket from "ws";
import { startDaemon } from "../src/daemon.js";
import { silentLogger } from "../src/log.js";
import { consoleFolder, writeJob } from "../test/support/console-daemon.js";

const ROUNDS = 5;
const SUBSCRIBES = 10_000;
/** One tool result kept whole on the live stream (LIVE_RESULT_CHARS cuts at 16,000). */
const BIG = "x".repeat(15_000);
/** Twenty reads of it: a replay of about 300 KB for each subscribe to the run. */
const READS = 20;
const WAIT_MS = 30_000;

export interface SubscribeFloodResult {
  subscribes: number;
  rounds: number;
  /** The loop's longest stall in each round. */
  stallsMs: number[];
  /** The close code each flood ended with (1008: dropped past the rate). */
  codes: number[];
}

export async function benchSubscribeFlood(): Promise<SubscribeFloodResult> {
  // The folder and job the test uses (test/support/console-daemon.ts).
  const home = await consoleFolder();
  await writeFile(join(home, "workspace", "big.txt"), BIG);
  // The same read many times over is what makes the replay large; the breaker would end it.
  await writeJob(home, "reader", "prompt: read the big file\nbreaker: false\n");
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  let release = () => {};
  let holding = false;
  const held = new Promise<void>((resolve) => (release = resolve));
  mock.onMessage("read the big file", async (request: ChatCompletionRequest): Promise<FixtureResponse> => {
    if (!request.messages.some((message) => message.role === "tool")) {
      return { toolCalls: Array.from({ length: READS }, () => ({ name: "read_file", arguments: JSON.stringify({ path: "big.txt" }) })) };
    }
    holding = true;
    await held;
    return { content: "done" };
  });
  const daemon = await startDaemon({
    configFile: join(home, "countd.yaml"),
    env: { PATH: process.env["PATH"] ?? "", OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-bench-subscribe" },
    logger: silentLogger,
  });
  try {
    const origin = new URL(daemon.console.url!).origin;
    const host = new URL(origin).host;
    const token = (await readFile(join(daemon.config.paths.state, "console.token"), "utf8")).trim();
    const authorization = `Bearer ${token}`;
    const started = await fetch(`${origin}/api/jobs/reader/run`, { method: "POST", headers: { authorization } });
    const runId = ((await started.json()) as { run_id: string }).run_id;
    // The run is held at its second request, its twenty reads done: each subscribe to it replays them.
    const deadline = Date.now() + WAIT_MS;
    while (!holding) {
      if (Date.now() > deadline) throw new Error("bench/console: the reader run did not reach its second request");
      await sleep(50);
    }
    const stallsMs: number[] = [];
    const codes: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const flood = new WebSocket(`ws://${host}/api/ws`, { headers: { authorization } });
      flood.on("message", () => {});
      await new Promise((resolve, reject) => flood.once("open", resolve).once("error", reject));
      const closed = new Promise<number>((resolve) => flood.once("close", (code) => resolve(code)));
      const burst = Array.from({ length: SUBSCRIBES }, (_, i) => JSON.stringify({ type: "subscribe", ...(i % 2 ? { run: runId } : {}) }));
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      for (const message of burst) flood.send(message);
      codes.push(await closed);
      const status = await fetch(`${origin}/api/status`, { headers: { authorization } });
      await status.arrayBuffer();
      delay.disable();
      if (status.status !== 200) throw new Error(`bench/console: /api/status answered ${status.status} after the flood`);
      stallsMs.push(delay.max / 1e6);
      // The next client starts on a rate limit of its own, once this one's sends have drained.
      await sleep(1_100);
    }
    return { subscribes: SUBSCRIBES, rounds: ROUNDS, stallsMs, codes };
  } finally {
    release();
    await daemon.stop();
    await mock.stop();
    await rm(home, { recursive: true, force: true, maxRetries: 5 });
  }
}
