import { describe, expect, it } from "vitest";
import { Redactor } from "../../src/audit/redact.js";
import { LIVE_RESULT_CHARS, LiveHub, REPLAY_BYTES_PER_RUN, SLOW_CLIENT_BYTES, type LiveSocket } from "../../src/console/live.js";
import type { LiveMessage } from "../../src/console/protocol.js";
import { EventBus } from "../../src/events.js";
import { emptyUsage, type Usage } from "../../src/providers/types.js";
import type { RunRecord } from "../../src/store/run-record.js";

/** A WebSocket as the hub sees it: what was sent, whether and how it was closed, and how much it has not yet written. */
class FakeSocket implements LiveSocket {
  bufferedAmount = 0;
  readonly texts: string[] = [];
  closed?: { code: number; reason: string };

  send(text: string): void {
    if (this.closed) throw new Error("send on a closed socket");
    this.texts.push(text);
  }

  close(code: number, reason: string): void {
    this.closed = { code, reason };
  }

  get messages(): LiveMessage[] {
    return this.texts.map((text) => JSON.parse(text) as LiveMessage);
  }

  get types(): string[] {
    return this.messages.map((m) => m.type);
  }
}

const API_KEY = "sk-live-0123456789abcdefSECRET";
const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const usage = (input: number, output: number, cached = 0): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cachedInputTokens: cached,
  cacheWriteTokens: 0,
});

function record(job: string, id: string, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    id,
    job,
    reason: "manual",
    scheduledAt: "2026-12-02T09:00:00.000Z",
    startedAt: "2026-12-02T09:00:00.010Z",
    status: "running",
    iterations: 0,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `cron:${job}:${id}`,
    ...extra,
  };
}

function hub(secrets: string[] = [API_KEY, HOOK_SECRET]) {
  const events = new EventBus();
  let redactor = new Redactor(secrets);
  const live = new LiveHub(events, () => redactor);
  return { events, live, setSecrets: (next: string[]) => (redactor = new Redactor(next)) };
}

/** A run as the runner and the agent loop announce it: start, one iteration with a chunked answer and a tool call, its LLM call ($0.25, of a whole binary fraction so that sums compare exactly). */
function runUntilTool(events: EventBus, run: RunRecord) {
  events.emit("run.started", { run });
  events.emit("iteration", { sessionId: run.sessionId, iteration: 1 });
  events.emit("answer.chunk", { sessionId: run.sessionId, text: "Let me " });
  events.emit("answer.chunk", { sessionId: run.sessionId, text: "look." });
  events.emit("tool.started", { sessionId: run.sessionId, callId: "call-1", name: "list_dir", arguments: { path: "." } });
  events.emit("tool.finished", {
    sessionId: run.sessionId,
    callId: "call-1",
    name: "list_dir",
    arguments: { path: "." },
    result: "a.txt\nb.txt",
    durationMs: 3.4,
    attempts: 1,
  });
  events.emit("llm.finished", {
    sessionId: run.sessionId,
    model: "gpt-test",
    usage: usage(100, 20, 60),
    cost: 0.25,
    durationMs: 120.6,
    finishReason: "tool_calls",
    attempts: 1,
  });
}

function finish(events: EventBus, run: RunRecord, extra: Partial<RunRecord> = {}) {
  events.emit("run.finished", {
    run: {
      ...run,
      status: "ok",
      finishedAt: "2026-12-02T09:00:05.000Z",
      usage: usage(150, 30, 60),
      cost: 0.375,
      model: "gpt-test",
      ...extra,
    },
  });
}

const RUN_A = record("report", "20261202T090000Z-aaaa");
const RUN_B = record("backup", "20261202T090001Z-bbbb");
const RUN_C = record("cleanup", "20261202T090002Z-cccc");

describe("LiveHub", () => {
  it("sends a connected client every message of a run, in order, in the original design's shapes", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    live.connect(socket);
    runUntilTool(events, RUN_A);
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "Two files." });
    finish(events, RUN_A);

    expect(socket.types).toEqual([
      "replay",
      "live",
      "run_started",
      "iteration",
      "stream",
      "stream",
      "tool_start",
      "tool_result",
      "llm",
      "stream",
      "run_finished",
    ]);
    const [, , started, iteration, chunk1, chunk2, toolStart, toolResult, llm, , finished] = socket.messages;
    expect(started).toMatchObject({ type: "run_started", run_id: RUN_A.id, job: "report", run: { id: RUN_A.id, status: "running" } });
    expect(iteration).toEqual({ type: "iteration", run_id: RUN_A.id, job: "report", iteration: 1 });
    expect(chunk1).toEqual({ type: "stream", run_id: RUN_A.id, job: "report", content: "Let me " });
    expect(chunk2).toEqual({ type: "stream", run_id: RUN_A.id, job: "report", content: "look." });
    expect(toolStart).toEqual({
      type: "tool_start",
      run_id: RUN_A.id,
      job: "report",
      call_id: "call-1",
      name: "list_dir",
      arguments: { path: "." },
    });
    expect(toolResult).toEqual({
      type: "tool_result",
      run_id: RUN_A.id,
      job: "report",
      call_id: "call-1",
      name: "list_dir",
      result: "a.txt\nb.txt",
      duration_ms: 3,
      attempts: 1,
    });
    expect(llm).toEqual({
      type: "llm",
      run_id: RUN_A.id,
      job: "report",
      model: "gpt-test",
      usage: usage(100, 20, 60),
      cost: 0.25,
      duration_ms: 121,
    });
    expect(finished).toMatchObject({
      type: "run_finished",
      run_id: RUN_A.id,
      job: "report",
      status: "ok",
      usage: usage(150, 30, 60),
      cost: 0.375,
      run: { status: "ok", cost: 0.375, model: "gpt-test" },
    });
    expect(finished).not.toHaveProperty("error");
  });

  it("a tool's error and a failed run's error are on their messages", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    live.connect(socket);
    events.emit("run.started", { run: RUN_A });
    events.emit("tool.finished", {
      sessionId: RUN_A.sessionId,
      callId: "c",
      name: "exec",
      arguments: {},
      result: "",
      durationMs: 1,
      attempts: 3,
      error: "exit code 2",
    });
    events.emit("llm.finished", {
      sessionId: RUN_A.sessionId,
      model: "m",
      usage: emptyUsage(),
      cost: null,
      durationMs: 5,
      finishReason: "error",
      attempts: 3,
      error: "HTTP 500",
    });
    finish(events, RUN_A, { status: "error", error: "LLM request failed: HTTP 500" });
    expect(socket.messages.slice(3)).toEqual([
      expect.objectContaining({ type: "tool_result", attempts: 3, error: "exit code 2" }),
      expect.objectContaining({ type: "llm", cost: null, error: "HTTP 500" }),
      expect.objectContaining({ type: "run_finished", status: "error", error: "LLM request failed: HTTP 500" }),
    ]);
  });

  it("gives a client that connects mid-run what the run produced so far, answer chunks joined, then `live`, then the rest as it happens", () => {
    const { events, live } = hub();
    const early = new FakeSocket();
    live.connect(early);
    runUntilTool(events, RUN_A);

    const late = new FakeSocket();
    live.connect(late);
    expect(late.types).toEqual(["replay", "run_started", "iteration", "stream", "tool_start", "tool_result", "llm", "live"]);
    expect(late.messages[3]).toEqual({ type: "stream", run_id: RUN_A.id, job: "report", content: "Let me look." });
    // The replay reads as the live messages did, but for the joined chunks.
    expect(late.messages.filter((m) => m.type !== "stream" && m.type !== "live" && m.type !== "replay")).toEqual(
      early.messages.filter((m) => m.type !== "stream" && m.type !== "live" && m.type !== "replay"),
    );

    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "Done" });
    finish(events, RUN_A);
    expect(late.types.slice(8)).toEqual(["stream", "run_finished"]);
    expect(late.messages[8]).toMatchObject({ content: "Done" });
    // The early client had no replay and saw every chunk on its own.
    expect(early.types.filter((t) => t === "stream")).toHaveLength(3);
  });

  it("joins only chunks that follow each other: text after a tool call is its own message on replay", () => {
    const { events, live } = hub();
    runUntilTool(events, RUN_A);
    events.emit("iteration", { sessionId: RUN_A.sessionId, iteration: 2 });
    for (const text of ["There ", "are ", "two."]) events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text });
    const late = new FakeSocket();
    live.connect(late);
    expect(late.messages.filter((m) => m.type === "stream").map((m) => (m as { content: string }).content)).toEqual([
      "Let me look.",
      "There are two.",
    ]);
  });

  it("replays nothing of a run that has ended, and a client after it receives only `live`", () => {
    const { events, live } = hub();
    runUntilTool(events, RUN_A);
    finish(events, RUN_A);
    const late = new FakeSocket();
    live.connect(late);
    expect(late.types).toEqual(["replay", "live"]);
    expect(live.active()).toEqual([]);
    expect(live.isRunning(RUN_A.id, RUN_A.job)).toBe(false);
  });

  it("keeps at most 1 MB of a run for replay; live clients still receive everything", () => {
    const { events, live } = hub();
    const early = new FakeSocket();
    live.connect(early);
    events.emit("run.started", { run: RUN_A });
    const chunk = "x".repeat(10_000);
    const chunks = 300; // 3 MB of answer
    for (let i = 0; i < chunks; i++) events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: chunk });
    events.emit("tool.started", { sessionId: RUN_A.sessionId, callId: "c", name: "list_dir", arguments: { path: "." } });

    expect(early.types.filter((t) => t === "stream")).toHaveLength(chunks);

    const late = new FakeSocket();
    live.connect(late);
    const replayed = late.texts.slice(0, -1);
    expect(replayed.reduce((sum, text) => sum + text.length, 0)).toBeLessThanOrEqual(REPLAY_BYTES_PER_RUN);
    expect(late.types.slice(0, 2)).toEqual(["replay", "run_started"]);
    const kept = (late.messages.find((m) => m.type === "stream") as { content: string }).content;
    // What is kept is the beginning of the answer, most of the megabyte.
    expect(kept).toBe(chunk.repeat(kept.length / chunk.length));
    expect(kept.length).toBeGreaterThan(REPLAY_BYTES_PER_RUN / 2);
    expect(late.types.at(-1)).toBe("live");

    // After the replay the late client is live like any other.
    finish(events, RUN_A);
    expect(late.types.at(-1)).toBe("run_finished");
    expect(early.types.at(-1)).toBe("run_finished");
  });

  it("cuts a long tool result on the wire, saying how long the whole result is", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    live.connect(socket);
    events.emit("run.started", { run: RUN_A });
    const result = "r".repeat(LIVE_RESULT_CHARS * 3);
    events.emit("tool.finished", {
      sessionId: RUN_A.sessionId,
      callId: "c",
      name: "read_file",
      arguments: {},
      result,
      durationMs: 1,
      attempts: 1,
    });
    const message = socket.messages.find((m) => m.type === "tool_result") as { result: string };
    expect(message.result.length).toBeLessThan(LIVE_RESULT_CHARS + 200);
    expect(message.result.startsWith("r".repeat(LIVE_RESULT_CHARS))).toBe(true);
    expect(message.result).toContain(`${result.length} characters in all`);
  });

  it("narrows a client to one run or one job, at connect or by subscribing later (with that run's replay)", () => {
    const { events, live } = hub();
    const all = new FakeSocket();
    const byRun = new FakeSocket();
    const byJob = new FakeSocket();
    const other = new FakeSocket();
    live.connect(all);
    live.connect(byRun, { run: RUN_A.id });
    live.connect(byJob, { job: "backup" });
    live.connect(other, { job: "nothing-like-it" });
    runUntilTool(events, RUN_A);
    runUntilTool(events, RUN_B);
    events.emit("delivery", {
      id: `report.${RUN_A.id}.webhook-1a2b3c`,
      status: "delivered",
      attempts: 1,
      target: "webhook-1a2b3c",
      to: "json webhook at https://hooks.example.com/report",
      kind: "webhook",
    });
    events.emit("delivery", {
      id: `backup.${RUN_B.id}.email-9f8e7d`,
      status: "queued",
      attempts: 0,
      target: "email-9f8e7d",
      to: "email to ops@example.com",
      kind: "email",
    });

    const runsOf = (socket: FakeSocket) => new Set(socket.messages.flatMap((m) => ("run_id" in m ? [m.run_id] : [])));
    expect(runsOf(all)).toEqual(new Set([RUN_A.id, RUN_B.id]));
    expect(runsOf(byRun)).toEqual(new Set([RUN_A.id]));
    expect(runsOf(byJob)).toEqual(new Set([RUN_B.id]));
    expect(other.types).toEqual(["replay", "live"]);
    expect(byRun.messages.at(-1)).toEqual({
      type: "delivery",
      id: `report.${RUN_A.id}.webhook-1a2b3c`,
      job: "report",
      run_id: RUN_A.id,
      status: "delivered",
      attempts: 1,
      target: "webhook-1a2b3c",
      to: "json webhook at https://hooks.example.com/report",
      kind: "webhook",
    });
    expect(byJob.messages.at(-1)).toMatchObject({ type: "delivery", job: "backup", run_id: RUN_B.id, kind: "email" });

    // Narrowing later: the run's messages so far, then live.
    const later = new FakeSocket();
    const client = live.connect(later);
    expect(runsOf(later)).toEqual(new Set([RUN_A.id, RUN_B.id]));
    later.texts.length = 0;
    client.subscribe({ run: RUN_B.id });
    expect(later.types).toEqual(["replay", "run_started", "iteration", "stream", "tool_start", "tool_result", "llm", "live"]);
    expect(runsOf(later)).toEqual(new Set([RUN_B.id]));
    finish(events, RUN_A);
    finish(events, RUN_B);
    expect(later.types.at(-1)).toBe("run_finished");
    expect(later.messages.at(-1)).toMatchObject({ run_id: RUN_B.id });
    expect(later.messages.filter((m) => m.type === "run_finished")).toHaveLength(1);
  });

  it("begins its answer to a subscription with `replay`: what a client got before it was the earlier filter's, what follows is each step once, in order", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    // A page on the job's screen, which moves to the run's screen while the run goes on.
    const client = live.connect(socket, { job: "report" });
    runUntilTool(events, RUN_A);
    events.emit("iteration", { sessionId: RUN_A.sessionId, iteration: 2 });
    client.subscribe({ run: RUN_A.id });
    events.emit("tool.started", { sessionId: RUN_A.sessionId, callId: "call-2", name: "read_file", arguments: { path: "a.txt" } });

    const mark = socket.types.lastIndexOf("replay");
    // Before the mark: the job's messages, which the replay brings again.
    expect(socket.types.slice(0, mark)).toEqual([
      "replay",
      "live",
      "run_started",
      "iteration",
      "stream",
      "stream",
      "tool_start",
      "tool_result",
      "llm",
      "iteration",
    ]);
    expect(socket.types.slice(mark)).toEqual([
      "replay",
      "run_started",
      "iteration",
      "stream",
      "tool_start",
      "tool_result",
      "llm",
      "iteration",
      "live",
      "tool_start",
    ]);
  });

  it("a delivery that belongs to no run reaches only the clients that asked for everything", () => {
    const { events, live } = hub();
    const all = new FakeSocket();
    const byJob = new FakeSocket();
    live.connect(all);
    live.connect(byJob, { job: "report" });
    events.emit("delivery", {
      id: "@heartbeat.checkin-20261202.webhook-1",
      status: "failed",
      attempts: 2,
      target: "webhook-1",
      to: "json webhook at https://hooks.example.com/beat",
      kind: "webhook",
      error: "HTTP 503",
      nextAttemptAt: "2026-12-02T09:10:00.000Z",
    });
    expect(all.messages.at(-1)).toEqual({
      type: "delivery",
      id: "@heartbeat.checkin-20261202.webhook-1",
      status: "failed",
      attempts: 2,
      target: "webhook-1",
      to: "json webhook at https://hooks.example.com/beat",
      kind: "webhook",
      error: "HTTP 503",
      next_attempt_at: "2026-12-02T09:10:00.000Z",
    });
    expect(byJob.types).toEqual(["replay", "live"]);
  });

  it("sends nothing of sessions that are no run (countd ask, subagents), nor of a run's session after it ended", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    live.connect(socket);
    events.emit("iteration", { sessionId: "ask:cli", iteration: 1 });
    events.emit("answer.chunk", { sessionId: "ask:cli", text: "private answer" });
    events.emit("tool.started", { sessionId: "subagent:1", callId: "c", name: "exec", arguments: { command: "ls" } });
    events.emit("llm.finished", {
      sessionId: "ask:cli",
      model: "m",
      usage: usage(1, 1),
      cost: null,
      durationMs: 1,
      finishReason: "stop",
      attempts: 1,
    });
    runUntilTool(events, RUN_A);
    finish(events, RUN_A);
    const count = socket.texts.length;
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "too late" });
    expect(socket.texts).toHaveLength(count);
    expect(socket.texts.join("\n")).not.toContain("private answer");
    expect(socket.types.filter((t) => t === "iteration")).toHaveLength(1);
  });

  it("never sends a secret's value: in answers, tool arguments and results, errors and deliveries, live and on replay", () => {
    const { events, live } = hub();
    const early = new FakeSocket();
    live.connect(early);
    const run = record("leaky", "20261202T090002Z-cccc");
    events.emit("run.started", { run });
    events.emit("answer.chunk", { sessionId: run.sessionId, text: `the key is ${API_KEY}.` });
    events.emit("tool.started", {
      sessionId: run.sessionId,
      callId: "c",
      name: "exec",
      arguments: {
        command: `curl -H 'Authorization: Bearer ${API_KEY}' https://api.example.com`,
        api_key: "not-listed-but-named-as-secret",
      },
    });
    events.emit("tool.finished", {
      sessionId: run.sessionId,
      callId: "c",
      name: "exec",
      arguments: {},
      result: `HOOK_SECRET=${HOOK_SECRET}`,
      durationMs: 1,
      attempts: 1,
      error: `failed with ${API_KEY}`,
    });
    events.emit("llm.finished", {
      sessionId: run.sessionId,
      model: "m",
      usage: usage(1, 1),
      cost: null,
      durationMs: 1,
      finishReason: "error",
      attempts: 1,
      error: `401 for key ${API_KEY}`,
    });
    const late = new FakeSocket();
    live.connect(late);
    events.emit("delivery", {
      id: `leaky.${run.id}.webhook-1`,
      status: "failed",
      attempts: 1,
      target: "webhook-1",
      to: "json webhook at https://hooks.example.com/beat",
      kind: "webhook",
      error: `rejected signature ${HOOK_SECRET}`,
    });
    finish(events, run, { status: "error", error: `stopped: ${API_KEY}`, resultExcerpt: `key ${API_KEY}` });

    for (const socket of [early, late]) {
      const all = socket.texts.join("\n");
      expect(all).not.toContain(API_KEY);
      expect(all).not.toContain(HOOK_SECRET);
      expect(all).not.toContain("not-listed-but-named-as-secret");
      expect(all).toContain("[REDACTED]");
    }
    expect(late.messages.find((m) => m.type === "stream")).toMatchObject({ content: "the key is [REDACTED]." });
    expect(late.messages.find((m) => m.type === "tool_start")).toMatchObject({
      arguments: { command: expect.stringContaining("Bearer [REDACTED]"), api_key: "[REDACTED]" },
    });
    expect(early.messages.find((m) => m.type === "tool_result")).toMatchObject({
      result: "HOOK_SECRET=[REDACTED]",
      error: "failed with [REDACTED]",
    });
    expect(early.messages.find((m) => m.type === "run_finished")).toMatchObject({
      error: "stopped: [REDACTED]",
      run: { resultExcerpt: "key [REDACTED]" },
    });
  });

  it("redacts with the secrets in force now: a reload's new secrets apply to the next message", () => {
    const { events, live, setSecrets } = hub([]);
    const socket = new FakeSocket();
    live.connect(socket);
    events.emit("run.started", { run: RUN_A });
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "token-after-reload-1234" });
    setSecrets(["token-after-reload-1234"]);
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "token-after-reload-1234" });
    expect(socket.messages.filter((m) => m.type === "stream").map((m) => (m as { content: string }).content)).toEqual([
      "token-after-reload-1234",
      "[REDACTED]",
    ]);
  });

  it("never sends a secret split across answer chunks, live or on replay; an end that only looked like one is sent when the answer ends", () => {
    const { events, live } = hub();
    const early = new FakeSocket();
    live.connect(early);
    events.emit("run.started", { run: RUN_A });
    // The key in three pieces, then a piece that starts like the key but never becomes it.
    for (const text of ["the key is ", API_KEY.slice(0, 10), API_KEY.slice(10, 20), `${API_KEY.slice(20)}. Also sk-live`]) {
      events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text });
    }
    const late = new FakeSocket();
    live.connect(late);
    events.emit("tool.started", { sessionId: RUN_A.sessionId, callId: "c", name: "list_dir", arguments: {} });
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "Done: sk-" });
    events.emit("run.finished", { run: { ...RUN_A, status: "ok", finishedAt: "2026-12-02T09:00:05.000Z" } });

    const streamed = (socket: FakeSocket) => socket.messages.flatMap((m) => (m.type === "stream" ? [m.content] : []));
    expect(streamed(early).join("")).toBe("the key is [REDACTED]. Also sk-liveDone: sk-");
    expect(streamed(late).join("")).toBe("the key is [REDACTED]. Also sk-liveDone: sk-");
    for (const socket of [early, late])
      for (const piece of [API_KEY.slice(0, 10), API_KEY.slice(10, 20)]) expect(socket.texts.join("")).not.toContain(piece);
    // The held end goes out before the message that ended the text.
    expect(early.types.slice(-5)).toEqual(["stream", "tool_start", "stream", "stream", "run_finished"]);
  });

  it("drops a client that falls behind by more than 4 MB with close code 1013, and keeps serving the others", () => {
    const { events, live } = hub();
    const slow = new FakeSocket();
    const fast = new FakeSocket();
    live.connect(slow);
    live.connect(fast);
    expect(live.clientCount()).toBe(2);
    events.emit("run.started", { run: RUN_A });
    slow.bufferedAmount = SLOW_CLIENT_BYTES; // at the limit: still served
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "one" });
    expect(slow.closed).toBeUndefined();
    slow.bufferedAmount = SLOW_CLIENT_BYTES + 1;
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "two" });
    expect(slow.closed).toEqual({ code: 1013, reason: expect.stringContaining("too slow") });
    expect(live.clientCount()).toBe(1);
    const sent = slow.texts.length;
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: "three" });
    finish(events, RUN_A);
    expect(slow.texts).toHaveLength(sent);
    expect(fast.messages.filter((m) => m.type === "stream").map((m) => (m as { content: string }).content)).toEqual([
      "one",
      "two",
      "three",
    ]);
  });

  it("a client already behind when it connects is dropped during its replay", () => {
    const { events, live } = hub();
    runUntilTool(events, RUN_A);
    const slow = new FakeSocket();
    slow.bufferedAmount = SLOW_CLIENT_BYTES + 1;
    live.connect(slow);
    expect(slow.closed?.code).toBe(1013);
    expect(slow.texts).toEqual([]);
    expect(live.clientCount()).toBe(0);
  });

  it("a closed client receives nothing more", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    const client = live.connect(socket);
    client.close();
    expect(live.clientCount()).toBe(0);
    runUntilTool(events, RUN_A);
    expect(socket.types).toEqual(["replay", "live"]);
  });

  it("knows the runs in progress: how far they got, their tokens and their cost so far (unknown once a call is unpriced)", () => {
    const { events, live } = hub();
    runUntilTool(events, RUN_A);
    events.emit("iteration", { sessionId: RUN_A.sessionId, iteration: 2 });
    events.emit("llm.finished", {
      sessionId: RUN_A.sessionId,
      model: "gpt-test",
      usage: usage(50, 5, 40),
      cost: 0.125,
      durationMs: 10,
      finishReason: "stop",
      attempts: 1,
    });
    runUntilTool(events, RUN_B);
    events.emit("llm.finished", {
      sessionId: RUN_B.sessionId,
      model: "local-model",
      usage: usage(50, 5),
      cost: null,
      durationMs: 10,
      finishReason: "stop",
      attempts: 1,
    });
    events.emit("run.started", { run: RUN_C });
    expect(live.active()).toEqual([
      { id: RUN_A.id, job: "report", reason: "manual", started_at: RUN_A.startedAt, iteration: 2, usage: usage(150, 25, 100), cost: 0.375 },
      { id: RUN_B.id, job: "backup", reason: "manual", started_at: RUN_B.startedAt, iteration: 1, usage: usage(150, 25, 60), cost: null },
      { id: RUN_C.id, job: "cleanup", reason: "manual", started_at: RUN_C.startedAt, iteration: 0, usage: emptyUsage(), cost: 0 },
    ]);
    expect(live.isRunning(RUN_A.id, "report")).toBe(true);
    expect(live.isRunning(RUN_A.id, "backup")).toBe(false);
    finish(events, RUN_A);
    expect(live.active().map((run) => run.id)).toEqual([RUN_B.id, RUN_C.id]);
  });

  it("tells its clients it is stopping (1001) and stops listening to the bus", () => {
    const { events, live } = hub();
    const socket = new FakeSocket();
    live.connect(socket);
    live.close();
    expect(socket.closed?.code).toBe(1001);
    expect(live.clientCount()).toBe(0);
    events.emit("run.started", { run: RUN_A });
    expect(live.active()).toEqual([]);
  });
});

describe("LiveHub in a cluster", () => {
  /** Two nodes' hubs, n1's messages handed to n2 as the cluster's channel hands them on. */
  function pair(connected = true) {
    const n1 = { events: new EventBus(), redactor: new Redactor([API_KEY]) };
    const n2 = { events: new EventBus(), redactor: new Redactor([API_KEY]) };
    const one = new LiveHub(n1.events, () => n1.redactor, { node: "n1" });
    const two = new LiveHub(n2.events, () => n2.redactor, { node: "n2" });
    const sent: LiveMessage[] = [];
    one.tap((message) => {
      sent.push(message);
      if (connected) two.remote(message);
    });
    return { events: n1.events, one, two, sent };
  }

  it("another node's run reaches this node's clients with its node, redacted there, and counts among the runs in progress until it ends", () => {
    const { events, one, two, sent } = pair();
    const socket = new FakeSocket();
    two.connect(socket);
    runUntilTool(events, RUN_A);
    events.emit("answer.chunk", { sessionId: RUN_A.sessionId, text: `the key is ${API_KEY} ok` });
    events.emit("iteration", { sessionId: RUN_A.sessionId, iteration: 2 });

    expect(sent.every((message) => message.node === "n1")).toBe(true);
    expect(JSON.stringify(sent)).not.toContain(API_KEY);
    expect(socket.messages.slice(2)).toEqual(sent);
    expect(two.active()).toEqual([
      {
        id: RUN_A.id,
        job: "report",
        reason: "manual",
        started_at: RUN_A.startedAt,
        iteration: 2,
        usage: usage(100, 20, 60),
        cost: 0.25,
        node: "n1",
      },
    ]);
    expect(one.active()).toEqual([expect.objectContaining({ id: RUN_A.id, node: "n1" })]);
    expect(two.isRunning(RUN_A.id, "report")).toBe(true);
    expect(two.localRuns()).toEqual([]);
    expect(one.localRuns()).toEqual([`report/${RUN_A.id}`]);

    finish(events, RUN_A);
    expect(socket.messages.at(-1)).toMatchObject({ type: "run_finished", run_id: RUN_A.id, node: "n1" });
    expect(two.active()).toEqual([]);
  });

  it("a node that joined late takes another's runs in progress from its snapshot, once; a client connecting then gets them from the start", () => {
    const { events, one, two } = pair(false);
    runUntilTool(events, RUN_A);
    const [snapshot] = one.snapshot();
    expect(snapshot?.[0]).toMatchObject({ type: "run_started", run_id: RUN_A.id, node: "n1" });
    two.remoteReplay(snapshot!);
    two.remoteReplay(snapshot!);

    const socket = new FakeSocket();
    two.connect(socket);
    expect(socket.types).toEqual(["replay", "run_started", "iteration", "stream", "tool_start", "tool_result", "llm", "live"]);
    expect(two.active()).toEqual([expect.objectContaining({ id: RUN_A.id, iteration: 1, usage: usage(100, 20, 60), node: "n1" })]);
  });

  it("forgets a node's runs it no longer names, and every run of a node that went", () => {
    const { events, two } = pair();
    runUntilTool(events, RUN_A);
    runUntilTool(events, RUN_B);
    two.forget("n1", new Set([`backup/${RUN_B.id}`]));
    expect(two.active().map((run) => run.id)).toEqual([RUN_B.id]);
    two.forget("n3");
    expect(two.active().map((run) => run.id)).toEqual([RUN_B.id]);
    two.forget("n1");
    expect(two.active()).toEqual([]);
  });
});
