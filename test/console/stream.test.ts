import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LiveMessage } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import {
  consoleFolder,
  daemonsOf,
  gate,
  openLive,
  startConsoleDaemon,
  writeJob,
  type ConsoleDaemon,
  type LiveClient,
} from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* The live stream on /api/ws for real runs of a real daemon, read by real `ws` clients. */

const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FIRST_WORDS = "Let me look at the workspace first.";
const ANSWER = "The workspace holds a.txt, which says alpha, and nothing else worth reporting today.";

type Of<T extends LiveMessage["type"]> = Extract<LiveMessage, { type: T }>;

/** The messages of one run, in order, with its answer chunks joined where they follow each other (as a replay joins them). */
function joined(messages: LiveMessage[]): LiveMessage[] {
  const out: LiveMessage[] = [];
  for (const message of messages) {
    const last = out.at(-1);
    if (message.type === "stream" && last?.type === "stream") out[out.length - 1] = { ...last, content: last.content + message.content };
    else out.push(message);
  }
  return out;
}

describe("the console's live stream", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  const gates: Array<() => void> = [];
  const clients: LiveClient[] = [];
  let hooks: WebhookReceiver;
  let console: ConsoleDaemon;

  /** The agent says a few words and lists the workspace, then answers; the second LLM call waits for `second` when given. */
  function agent(second?: Promise<void>) {
    mock.onMessage("list the workspace", async (request: ChatCompletionRequest): Promise<FixtureResponse> => {
      if (!request.messages.some((message) => message.role === "tool")) {
        return { content: FIRST_WORDS, toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
      }
      await second;
      return { content: ANSWER };
    });
  }

  beforeEach(async () => {
    hooks = await startWebhookReceiver({ secret: HOOK_SECRET });
    const dir = await consoleFolder({ extra: "secrets: [HOOK_SECRET]\njob_env: [HOOK_SECRET]\n" });
    await writeFile(join(dir, "workspace", "a.txt"), "alpha\n");
    await writeJob(
      dir,
      "lister",
      `prompt: list the workspace\ndeliver:\n  - webhook:\n      url: ${hooks.url}\n      secret: \${HOOK_SECRET}\n`,
    );
    await writeJob(dir, "other", "prompt: say hello\n");
    console = await startConsoleDaemon(dir, {
      OPENAI_BASE_URL: `${mock.url}/v1`,
      OPENAI_API_KEY: "sk-console-stream-test-key",
      HOOK_SECRET,
    });
    daemons.started.push(console);
  });
  afterEach(async () => {
    gates.splice(0).forEach((open) => open());
    clients.splice(0).forEach((client) => client.close());
    await daemons.cleanup();
    await hooks.close();
  });

  async function connect(
    query = "",
    options: Parameters<typeof openLive>[1] = { headers: { authorization: `Bearer ${console.token}` } },
  ): Promise<LiveClient> {
    const opened = await openLive(`ws://${console.host}/api/ws${query}`, options);
    if (!opened.ok) throw new Error(`WebSocket refused: ${opened.status ?? opened.error}`);
    clients.push(opened.client);
    await opened.client.next((message) => message.type === "live", "live");
    return opened.client;
  }

  it("sends a real run's run_started, answer chunks, tool_start/tool_result, llm, run_finished and its delivery, in order", async () => {
    agent();
    const client = await connect();
    const { body } = await console.post("/api/jobs/lister/run");
    const runId = body.run_id as string;
    await client.next((m) => m.type === "delivery" && m.status === "delivered", "delivered");

    const mine = client.messages.filter((m) => "run_id" in m && m.run_id === runId);
    // The run's own messages, in the order things happened (its delivery is queued as it ends, and sent beside).
    const run = joined(mine.filter((m) => m.type !== "delivery"));
    expect(run.map((m) => m.type)).toEqual([
      "run_started",
      "iteration",
      "stream",
      "llm",
      "tool_start",
      "tool_result",
      "iteration",
      "stream",
      "llm",
      "run_finished",
    ]);
    expect(run[0]).toMatchObject({ type: "run_started", job: "lister", run: { id: runId, status: "running", reason: "manual" } });
    expect(run[1]).toEqual({ type: "iteration", run_id: runId, job: "lister", iteration: 1 });
    expect(run[2]).toEqual({ type: "stream", run_id: runId, job: "lister", content: FIRST_WORDS });
    expect(run[3]).toMatchObject({
      type: "llm",
      model: expect.any(String),
      usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) },
      duration_ms: expect.any(Number),
    });
    expect(run[4]).toMatchObject({
      type: "tool_start",
      job: "lister",
      name: "list_dir",
      arguments: { path: "." },
      call_id: expect.any(String),
    });
    expect(run[5]).toMatchObject({
      type: "tool_result",
      name: "list_dir",
      call_id: (run[4] as Of<"tool_start">).call_id,
      result: expect.stringContaining("a.txt"),
      attempts: 1,
      duration_ms: expect.any(Number),
    });
    expect(run[5]).not.toHaveProperty("error");
    expect(run[7]).toEqual({ type: "stream", run_id: runId, job: "lister", content: ANSWER });
    // The answer really streamed: in more than one chunk.
    expect(mine.filter((m) => m.type === "stream").length).toBeGreaterThan(2);

    const finished = run[9] as Of<"run_finished">;
    expect(finished).toMatchObject({ status: "ok", job: "lister", run: { id: runId, status: "ok", iterations: 2, toolCalls: 1 } });
    expect(finished.usage).toEqual(finished.run.usage);
    expect(finished).not.toHaveProperty("error");

    const deliveries = mine.filter((m) => m.type === "delivery") as Array<Of<"delivery">>;
    expect(deliveries.map((m) => m.status)).toContain("queued");
    expect(deliveries.at(-1)).toMatchObject({
      status: "delivered",
      kind: "webhook",
      job: "lister",
      run_id: runId,
      attempts: 1,
      id: hooks.acknowledgedIds()[0],
    });
    expect(JSON.stringify(client.messages)).not.toContain(HOOK_SECRET);
  });

  it("a client that connects mid-run first receives what the run produced so far, then `live`, then the rest", async () => {
    const second = gate();
    gates.push(second.open);
    agent(second.wait);
    const early = await connect();
    const { body } = await console.post("/api/jobs/lister/run");
    const runId = body.run_id as string;
    // The first LLM call and the tool call are done; the second LLM call is held.
    await early.next((m) => m.type === "iteration" && m.iteration === 2, "iteration 2");

    // As the page connects: the cookie and the console's own Origin.
    const signIn = await fetch(`${console.origin}/?token=${console.token}`, { redirect: "manual" });
    const cookie = signIn.headers.get("set-cookie")!.split(";", 1)[0]!;
    const late = await connect("", { headers: { cookie }, origin: console.origin });
    const liveAt = late.messages.findIndex((m) => m.type === "live");
    const replay = late.messages.slice(0, liveAt);
    expect(replay.map((m) => m.type)).toEqual([
      "replay",
      "run_started",
      "iteration",
      "stream",
      "llm",
      "tool_start",
      "tool_result",
      "iteration",
    ]);
    // What the late client was given is what the early one saw, the chunks joined.
    expect(replay.slice(1)).toEqual(joined(early.messages.filter((m) => m.type !== "live" && m.type !== "replay")));
    expect(replay[3]).toMatchObject({ content: FIRST_WORDS });
    for (const message of replay.slice(1)) expect(message).toMatchObject({ run_id: runId, job: "lister" });

    second.open();
    await late.next((m) => m.type === "run_finished", "run_finished");
    const after = late.messages.slice(liveAt + 1);
    expect(after.filter((m) => m.type === "live")).toEqual([]);
    expect(joined(after.filter((m) => m.type !== "delivery")).map((m) => m.type)).toEqual(["stream", "llm", "run_finished"]);
    expect(joined(after)[0]).toMatchObject({ type: "stream", content: ANSWER });
    expect(late.messages.filter((m) => m.type === "run_started")).toHaveLength(1);
  });

  it("narrows to one job (?job=) or one run (a subscribe message, with its replay); a message that is no subscription closes the socket", async () => {
    mock.onMessage("say hello", { content: "hello there" });
    const second = gate();
    gates.push(second.open);
    agent(second.wait);
    const others = await connect("?job=other");
    const all = await connect();
    const { body } = await console.post("/api/jobs/lister/run");
    const runId = body.run_id as string;
    await all.next((m) => m.type === "iteration" && m.iteration === 2, "iteration 2");

    const byRun = await connect("?job=nothing");
    byRun.messages.length = 0;
    byRun.ws.send(JSON.stringify({ type: "subscribe", run: runId }));
    await byRun.next((m) => m.type === "live", "live after subscribing");
    expect(byRun.messages.slice(0, 2)).toMatchObject([{ type: "replay" }, { type: "run_started", run_id: runId }]);

    const hello = await console.post("/api/jobs/other/run");
    await others.next((m) => m.type === "run_finished", "the other job's end");
    second.open();
    await all.next((m) => m.type === "run_finished" && m.run_id === runId, "lister's end");
    await byRun.next((m) => m.type === "run_finished", "run_finished");

    expect(new Set(others.messages.flatMap((m) => ("job" in m && m.job !== undefined ? [m.job] : [])))).toEqual(new Set(["other"]));
    expect(new Set(byRun.messages.flatMap((m) => ("run_id" in m && m.run_id !== undefined ? [m.run_id] : [])))).toEqual(new Set([runId]));
    expect(new Set(all.messages.flatMap((m) => ("run_id" in m && m.run_id !== undefined ? [m.run_id] : [])))).toEqual(
      new Set([runId, hello.body.run_id]),
    );

    const closed = new Promise<number>((resolve) => byRun.ws.on("close", (code) => resolve(code)));
    byRun.ws.send("please send everything");
    expect(await closed).toBe(1003);
  });

  it("tells its clients when the daemon stops (1001), after the runs in progress have ended", async () => {
    const second = gate();
    gates.push(second.open);
    agent(second.wait);
    const client = await connect();
    await console.post("/api/jobs/lister/run");
    await client.next((m) => m.type === "tool_result", "tool_result");
    const closed = new Promise<number>((resolve) => client.ws.on("close", (code) => resolve(code)));
    await console.stop();
    expect(await closed).toBe(1001);
    // The run cut short by the stop was seen ending before the socket closed.
    expect(client.messages.at(-1)).toMatchObject({ type: "run_finished", status: "cancelled" });
  });
});
