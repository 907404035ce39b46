import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { heartbeatPrompt } from "../../src/agent/heartbeat-prompt.js";
import type { HeartbeatConfig } from "../../src/config/schema.js";
import { MemoryStore, type MemoryEntry } from "../../src/memory/store.js";
import { checkInsOf, checkInsToChange, StateStore, type CheckInState } from "../../src/store/state.js";
import { checklistIsActionable, decideHeartbeat, messageHash } from "../../src/triggers/heartbeat.js";
import { captureLog } from "../support/log-capture.js";
import { useAimock } from "../support/aimock.js";
import { openCheckInStack, type CheckInStack } from "../support/check-in-stack.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const HOUR = 3_600_000;
const hm = (text: string): number => {
  const [h, m] = text.split(":").map(Number);
  return h! * 60 + m!;
};

function heartbeatConfig(overrides: Partial<HeartbeatConfig> = {}): HeartbeatConfig {
  return {
    enabled: true,
    everyMs: 30 * 60_000,
    activeHours: { start: hm("08:00"), end: hm("21:00") },
    timezone: "Asia/Shanghai",
    idleThresholdMs: 4 * HOUR,
    maxPerDay: 2,
    checklist: "/nonexistent/HEARTBEAT.md",
    deliver: [],
    provider: undefined,
    model: undefined,
    budget: {},
    ...overrides,
  };
}

const OPEN_CHECKLIST = "# Heartbeat\n- [ ] remind me to water the plants\n";
const DONE_CHECKLIST = "# Heartbeat\n<!-- add items below -->\n- [x] water the plants\n";

describe("checklistIsActionable", () => {
  it.each([
    ["an unchecked task", "- [ ] call the bank", true],
    ["an unchecked numbered task", "1. [ ] renew the domain", true],
    ["a plain instruction line", "Tell me if the backup log shows errors", true],
    ["a plain list item", "* check the inbox", true],
    ["only headings", "# Heartbeat\n## Daily\n", false],
    ["only checked tasks", "- [x] done\n- [X] also done", false],
    ["a checked task without list marker", "[x] done", false],
    ["an empty checkbox", "- [ ]   \n-\n", false],
    ["a one-line comment", "<!-- - [ ] example item -->", false],
    ["a comment across lines", "<!--\n- [ ] example\nmore example\n-->", false],
    ["a thematic break", "# Tasks\n---\n* * *", false],
    ["blank lines", "\n  \n\t\n", false],
    ["a missing file", undefined, false],
  ])("%s → %s", (_what, text, expected) => {
    expect(checklistIsActionable(text)).toBe(expected);
  });
});

/** Each rule's one skip code, by the start of its reason. */
const SKIP_OF_RULE: Record<string, string> = {
  "outside active hours": "outside_active_hours",
  "daily cap reached": "daily_cap",
  "user in contact recently": "recent_contact",
  "nothing to do": "nothing_to_do",
};

const skipOfRule = (reason: string) => Object.entries(SKIP_OF_RULE).find(([start]) => reason.startsWith(start))?.[1];

describe("decideHeartbeat", () => {
  const empty: CheckInState = { delivered: [] };
  const delivered = (...ats: string[]): CheckInState => ({ delivered: ats.map((at) => ({ at, hash: "h" })) });

  it.each<[string, { now: string; config?: Partial<HeartbeatConfig>; state?: CheckInState; checklist?: string }, string | undefined]>([
    ["22:14 Shanghai is after 21:00", { now: "2026-03-05T14:14:00Z" }, "outside active hours 08:00-21:00 (now 22:14 Asia/Shanghai)"],
    ["07:59 is before 08:00", { now: "2026-03-04T23:59:00Z" }, "outside active hours 08:00-21:00 (now 07:59 Asia/Shanghai)"],
    ["08:00 is the first active minute", { now: "2026-03-05T00:00:00Z" }, undefined],
    [
      "21:00 is past the end (the end is exclusive)",
      { now: "2026-03-05T13:00:00Z" },
      "outside active hours 08:00-21:00 (now 21:00 Asia/Shanghai)",
    ],
    [
      "23:00 inside 22:30-06:00",
      { now: "2026-03-05T15:00:00Z", config: { activeHours: { start: hm("22:30"), end: hm("06:00") } } },
      undefined,
    ],
    [
      "03:00 inside 22:30-06:00",
      { now: "2026-03-05T19:00:00Z", config: { activeHours: { start: hm("22:30"), end: hm("06:00") } } },
      undefined,
    ],
    [
      "12:00 outside 22:30-06:00",
      { now: "2026-03-05T04:00:00Z", config: { activeHours: { start: hm("22:30"), end: hm("06:00") } } },
      "outside active hours 22:30-06:00 (now 12:00 Asia/Shanghai)",
    ],
    ["00:00-00:00 means all day", { now: "2026-03-05T19:00:00Z", config: { activeHours: { start: 0, end: 0 } } }, undefined],
    [
      "two check-ins today reach the cap of 2",
      { now: "2026-03-05T08:00:00Z", state: delivered("2026-03-05T01:00:00Z", "2026-03-05T03:00:00Z"), checklist: OPEN_CHECKLIST },
      "daily cap reached: 2 of 2 check-ins delivered today (2026-03-05 Asia/Shanghai)",
    ],
    [
      // 00:10 and 06:00 on 6 March in Shanghai are 5 March in UTC: the cap counts Shanghai's day.
      "the cap counts days in the configured zone, not UTC",
      { now: "2026-03-06T00:30:00Z", state: delivered("2026-03-05T16:10:00Z", "2026-03-05T22:00:00Z"), checklist: OPEN_CHECKLIST },
      "daily cap reached: 2 of 2 check-ins delivered today (2026-03-06 Asia/Shanghai)",
    ],
    [
      // 23:30 on 5 March in New York is the same UTC day as 09:00 on 6 March, but not the same New York day.
      "yesterday's check-ins in the configured zone do not count",
      {
        now: "2026-03-06T14:00:00Z",
        config: { timezone: "America/New_York", maxPerDay: 1 },
        state: delivered("2026-03-06T04:30:00Z"),
        checklist: OPEN_CHECKLIST,
      },
      undefined,
    ],
    [
      "contact 1h12m ago is inside the 4h idle threshold",
      { now: "2026-03-05T02:00:00Z", state: { delivered: [], lastContactAt: "2026-03-05T00:48:00Z" }, checklist: OPEN_CHECKLIST },
      "user in contact recently: last contact 1h 12m ago, idle threshold 4h",
    ],
    [
      "contact exactly 4h ago is idle enough",
      { now: "2026-03-05T04:00:00Z", state: { delivered: [], lastContactAt: "2026-03-05T00:00:00Z" } },
      undefined,
    ],
    [
      "nothing open and a check-in already delivered today",
      { now: "2026-03-05T08:00:00Z", state: delivered("2026-03-05T01:00:00Z"), checklist: DONE_CHECKLIST },
      "nothing to do: no open item in the checklist, and a check-in was already delivered today (2026-03-05 Asia/Shanghai)",
    ],
    [
      "no checklist file and a check-in already delivered today",
      { now: "2026-03-05T08:00:00Z", state: delivered("2026-03-05T01:00:00Z") },
      "nothing to do: no checklist file, and a check-in was already delivered today (2026-03-05 Asia/Shanghai)",
    ],
    [
      "an open item runs even after today's greeting",
      { now: "2026-03-05T08:00:00Z", state: delivered("2026-03-05T01:00:00Z"), checklist: OPEN_CHECKLIST },
      undefined,
    ],
    [
      "a greeting is due: nothing delivered today and idle",
      { now: "2026-03-05T08:00:00Z", state: delivered("2026-03-04T08:00:00Z"), checklist: DONE_CHECKLIST },
      undefined,
    ],
  ])("%s", (_what, { now, config, state = empty, checklist }, reason) => {
    const decision = decideHeartbeat({ now: new Date(now), config: heartbeatConfig(config), state, checklist });
    expect(decision).toEqual(reason === undefined ? { run: true } : { run: false, skip: skipOfRule(reason), reason });
  });
});

describe("heartbeatPrompt", () => {
  const memories: MemoryEntry[] = [
    { line: 1, date: "2026-03-01", source: "user", text: "Prefers short emails" },
    { line: 2, date: "2026-03-04", source: "agent", text: "Dentist appointment on 6 March at 15:00" },
  ];

  it("gives the time of day, idle hours, memory, checklist and the one-call instruction in English", () => {
    const prompt = heartbeatPrompt({
      now: new Date("2026-03-05T01:30:00Z"),
      timezone: "Asia/Shanghai",
      idleHours: 5.46,
      persona: { name: "Ada", userName: "Sam", personality: "gentle", locale: "en" },
      memories,
      checklist: OPEN_CHECKLIST,
    });
    expect(prompt).toContain("Thursday 2026-03-05, 09:30 (Asia/Shanghai): morning.");
    expect(prompt).toContain("about 5.5 hours ago");
    expect(prompt).toContain("- 2026-03-04 (agent): Dentist appointment on 6 March at 15:00");
    expect(prompt).toContain("- [ ] remind me to water the plants");
    expect(prompt).toContain("Call heartbeat_respond exactly once");
    expect(prompt).toContain("notify: false with an empty message when nothing is worth saying");
    expect(prompt).toContain('addressing the user as "Sam"');
  });

  it("speaks Chinese for a zh persona, and says when there has been no contact or checklist", () => {
    const prompt = heartbeatPrompt({
      now: new Date("2026-03-05T12:00:00Z"),
      timezone: "Asia/Shanghai",
      idleHours: undefined,
      persona: { name: "小助", personality: "gentle", locale: "zh" },
      memories,
      checklist: undefined,
    });
    expect(prompt).toContain("2026-03-05 星期四 20:00（时区 Asia/Shanghai），晚上。");
    expect(prompt).toContain("还没有与用户联系过的记录。");
    expect(prompt).toContain("- 2026-03-01（user）：Prefers short emails");
    expect(prompt).toContain("（没有检查清单）");
    expect(prompt).toContain("调用 heartbeat_respond 恰好一次");
    expect(prompt).not.toMatch(/Heartbeat check-in|worth saying/);
  });

  it("shows only the head of a very long checklist", () => {
    const prompt = heartbeatPrompt({
      now: new Date("2026-03-05T01:30:00Z"),
      timezone: "UTC",
      idleHours: 2,
      persona: { name: "Ada", personality: "gentle", locale: "en" },
      memories: [],
      checklist: `- [ ] first\n${"x".repeat(20_000)}`,
    });
    expect(prompt).toContain("- [ ] first");
    expect(prompt).toMatch(/\[… \d+ more characters not shown\]/);
    expect(prompt.length).toBeLessThan(12_000);
  });
});

type WireRequest = { messages: Array<{ role: string; content: unknown }>; tools?: Array<{ function: { name: string } }> };
const textOf = (content: unknown): string =>
  typeof content === "string" ? content : Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";

/**
 * The heartbeat as the daemon runs it (its job's gate and executor over the real runner,
 * dispatcher and outbox), ticked by hand at a test clock; its check-ins go to a webhook receiver.
 */
describe("the heartbeat's check-ins through the runner and the outbox", () => {
  const mock = useAimock();
  let receiver: WebhookReceiver;
  let root: string;
  let workspace: string;
  let stateDir: string;
  let clock: Date;
  let captured: ReturnType<typeof captureLog>;
  let exchange: Date | undefined;
  const stacks: CheckInStack[] = [];

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "countd-heartbeat-"));
    workspace = join(root, "workspace");
    stateDir = join(root, "state");
    await mkdir(workspace, { recursive: true });
    // 09:00 in Shanghai.
    clock = new Date("2026-03-05T01:00:00Z");
    captured = captureLog();
    exchange = undefined;
    receiver.requests.length = 0;
  });
  afterEach(async () => {
    for (const stack of stacks.splice(0)) await stack.close();
  });

  const advance = (ms: number) => {
    clock = new Date(clock.getTime() + ms);
  };

  /** What the webhook receiver was sent: each check-in's text. */
  const sent = () => receiver.requests.filter((r) => r.status === 200 || r.status === undefined).map((r) => JSON.parse(r.body).result);

  async function service(config: { maxPerDay?: number } = {}): Promise<CheckInStack> {
    const yaml = [
      "timezone: Asia/Shanghai",
      "tools:\n  exec:\n    sandbox: none",
      "heartbeat:",
      "  enabled: true",
      '  active_hours: "08:00-21:00"',
      "  idle_threshold: 4h",
      `  max_per_day: ${config.maxPerDay ?? 2}`,
      "  deliver:",
      `    - webhook: { url: "${receiver.url}" }`,
    ].join("\n");
    const stack = await openCheckInStack({
      dir: root,
      yaml,
      env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-heartbeat-test-key" },
      now: () => clock,
      lastExchange: async () => exchange,
      log: captured.log,
    });
    stacks.push(stack);
    return stack;
  }

  /** The model's turn: call heartbeat_respond with `call` (or answer `answer` without it), then say HEARTBEAT_OK. */
  function agentReplies(call: { notify: boolean; message: string } | undefined, answer = "HEARTBEAT_OK") {
    mock.clearFixtures();
    mock.addFixture({ match: { userMessage: "Heartbeat check-in", hasToolResult: true }, response: { content: "HEARTBEAT_OK" } });
    mock.addFixture({
      match: { userMessage: "Heartbeat check-in", hasToolResult: false },
      response: call ? { toolCalls: [{ name: "heartbeat_respond", arguments: JSON.stringify(call) }] } : { content: answer },
    });
  }

  async function writeChecklist(text: string) {
    const memory = new MemoryStore(workspace);
    await memory.append("user", "The plants need water every three days", new Date("2026-03-02T10:00:00"));
    await writeFile(join(workspace, "HEARTBEAT.md"), text);
  }

  const reasons = (msg: string) => captured.lines.filter((line) => line.msg === msg).map((line) => line.fields["reason"]);

  describe("every skip path makes zero LLM requests", () => {
    it.each<[string, () => Promise<void>, RegExp, string]>([
      [
        "outside active hours",
        async () => advance(13 * HOUR), // 22:00 in Shanghai
        /^outside active hours 08:00-21:00 \(now 22:00 Asia\/Shanghai\)$/,
        "outside_active_hours",
      ],
      [
        "daily cap",
        async () => {
          const state = await StateStore.open(stateDir);
          await state.update((d) => {
            checkInsToChange(d).delivered.push({ at: "2026-03-05T00:10:00Z", hash: "a" }, { at: "2026-03-05T00:20:00Z", hash: "b" });
          });
        },
        /^daily cap reached: 2 of 2/,
        "daily_cap",
      ],
      [
        "inside the idle threshold",
        async () => {
          const state = await StateStore.open(stateDir);
          await state.update((d) => {
            checkInsToChange(d).lastContactAt = "2026-03-05T00:00:00Z";
          });
        },
        /^user in contact recently: last contact 1h ago, idle threshold 4h$/,
        "recent_contact",
      ],
      [
        "inside the idle threshold after a countd ask exchange",
        async () => {
          exchange = new Date("2026-03-05T00:30:00Z");
        },
        /^user in contact recently: last contact 30m ago, idle threshold 4h$/,
        "recent_contact",
      ],
      [
        "nothing actionable and no greeting due",
        async () => {
          const state = await StateStore.open(stateDir);
          await state.update((d) => {
            checkInsToChange(d).delivered.push({ at: "2026-03-05T00:10:00Z", hash: "a" });
          });
          await writeFile(join(workspace, "HEARTBEAT.md"), DONE_CHECKLIST);
        },
        /^nothing to do: no open item in the checklist/,
        "nothing_to_do",
      ],
    ])("%s", async (_what, arrange, reason, skip) => {
      await writeChecklist(OPEN_CHECKLIST);
      await arrange();
      agentReplies({ notify: true, message: "Water the plants today." });
      const hb = await service();

      expect(await hb.tick()).toEqual({ decision: { outcome: "skipped", reason: skip } });
      expect(mock.getRequests()).toEqual([]);
      expect(sent()).toEqual([]);
      expect(await hb.state.runs("@heartbeat")).toEqual([]);
      expect(captured.lines).toEqual([
        { level: "info", msg: "heartbeat skipped", fields: { component: "heartbeat", reason: expect.stringMatching(reason) } },
      ]);
    });
  });

  it("delivers once when the agent notifies, as the run's answer, and records it in the state", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    agentReplies({ notify: true, message: "  Good morning! The plants need water today.\n" });
    const hb = await service();

    const { decision, run } = await hb.tick();
    expect(decision).toEqual({ outcome: "sent" });
    expect(run).toMatchObject({ job: "@heartbeat", reason: "heartbeat", status: "ok" });
    expect(sent()).toEqual(["Good morning! The plants need water today."]);
    expect(JSON.parse(receiver.requests[0]!.body)).toMatchObject({ type: "heartbeat", run: { id: run!.id } });
    expect(checkInsOf(hb.state.data)).toEqual({
      delivered: [{ at: "2026-03-05T01:00:00.000Z", hash: messageHash("Good morning! The plants need water today.") }],
      lastContactAt: "2026-03-05T01:00:00.000Z",
    });

    const first = mock.getRequests()[0]!.body as WireRequest;
    expect(first.tools?.map((t) => t.function.name)).toEqual(["heartbeat_respond"]);
    const prompt = textOf(first.messages.at(-1)!.content);
    expect(prompt).toContain("09:00 (Asia/Shanghai): morning.");
    expect(prompt).toContain("No contact with the user has been recorded yet.");
    expect(prompt).toContain("- 2026-03-02 (user): The plants need water every three days");
    expect(prompt).toContain("- [ ] remind me to water the plants");
  });

  it("delivers nothing when the agent calls heartbeat_respond with notify false", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    agentReplies({ notify: false, message: "" });
    const hb = await service();

    expect(await hb.tick()).toMatchObject({ decision: { outcome: "silent" }, run: { status: "ok" } });
    expect(reasons("heartbeat silent")).toEqual(["the agent chose not to notify"]);
    expect(mock.getRequests()).toHaveLength(2);
    expect(sent()).toEqual([]);
    expect(checkInsOf(hb.state.data)).toEqual({ delivered: [] });
  });

  it.each([
    ["a bare HEARTBEAT_OK answer", "  heartbeat_ok \n", "the agent answered HEARTBEAT_OK without calling heartbeat_respond"],
    [
      "an answer text without the tool call",
      "Good morning! Water the plants.",
      "the agent did not call heartbeat_respond (its answer text is never delivered)",
    ],
  ])("delivers nothing for %s", async (_what, answer, reason) => {
    await writeChecklist(OPEN_CHECKLIST);
    agentReplies(undefined, answer);
    const hb = await service();

    expect(await hb.tick()).toMatchObject({ decision: { outcome: "silent" } });
    expect(reasons("heartbeat silent")).toEqual([reason]);
    expect(mock.getRequests()).toHaveLength(1);
    expect(sent()).toEqual([]);
  });

  it("delivers nothing when notify is true but the message is empty or just HEARTBEAT_OK", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    const hb = await service();
    agentReplies({ notify: true, message: "   " });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "silent" } });
    agentReplies({ notify: true, message: "HEARTBEAT_OK" });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "silent" } });
    expect(reasons("heartbeat silent")).toEqual(["notify was true but the message was empty", "the message was just HEARTBEAT_OK"]);
    expect(sent()).toEqual([]);
  });

  it("suppresses a message identical to one delivered in the last 24 hours, and sends it again after", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    const hb = await service({ maxPerDay: 5 });
    agentReplies({ notify: true, message: "Water the plants today." });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });

    advance(5 * HOUR); // 14:00, past the idle threshold
    agentReplies({ notify: true, message: "Water  the plants\ntoday. " });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "duplicate" }, run: { status: "ok" } });
    expect(captured.lines).toContainEqual({
      level: "info",
      msg: "heartbeat suppressed: the same message was delivered before",
      fields: { component: "heartbeat", deliveredAt: "2026-03-05T01:00:00.000Z" },
    });

    advance(19 * HOUR + 60_000); // 09:01 the next day: 24h01m after the first delivery
    agentReplies({ notify: true, message: "Water the plants today." });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    expect(sent()).toEqual(["Water the plants today.", "Water the plants today."]);
  });

  it("skips the third tick without the LLM once two check-ins were delivered today", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    const hb = await service();
    agentReplies({ notify: true, message: "Morning: water the plants." });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    advance(4 * HOUR);
    agentReplies({ notify: true, message: "Afternoon: did you water the plants?" });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    const requests = mock.getRequests().length;

    advance(4 * HOUR); // 17:00, still active and idle
    expect(await hb.tick()).toEqual({ decision: { outcome: "skipped", reason: "daily_cap" } });
    expect(reasons("heartbeat skipped")).toEqual(["daily cap reached: 2 of 2 check-ins delivered today (2026-03-05 Asia/Shanghai)"]);
    expect(mock.getRequests()).toHaveLength(requests);
    expect(sent()).toHaveLength(2);
  });

  it("does not count an undelivered check-in toward the cap, and logs it", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    const hb = await service();
    agentReplies({ notify: true, message: "Water the plants today." });
    receiver.script(400);
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "failed" } });
    expect(captured.lines).toContainEqual({
      level: "error",
      msg: "heartbeat delivery failed",
      fields: { component: "heartbeat", runId: expect.any(String), error: expect.stringMatching(/^check-in not delivered: /) },
    });
    expect(checkInsOf(hb.state.data)).toEqual({ delivered: [] });

    // Neither the cap, the dedupe nor the idle threshold saw the failed attempt.
    advance(30 * 60_000);
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    advance(4 * HOUR);
    agentReplies({ notify: true, message: "Afternoon reminder: the plants." });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    advance(4 * HOUR);
    expect(await hb.tick()).toEqual({ decision: { outcome: "skipped", reason: "daily_cap" } });
    expect(sent()).toEqual(["Water the plants today.", "Afternoon reminder: the plants."]);
  });

  it("keeps its state across a restart: a new stack on the same directory still sees today's check-in", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    agentReplies({ notify: true, message: "Water the plants today." });
    const first = await service({ maxPerDay: 1 });
    expect(await first.tick()).toMatchObject({ decision: { outcome: "sent" } });
    await first.close();
    expect(JSON.parse(await readFile(join(stateDir, "state.json"), "utf8")).jobs["@heartbeat"].checkIns.delivered).toHaveLength(1);

    advance(5 * HOUR);
    const restarted = await service({ maxPerDay: 1 });
    expect(await restarted.tick()).toEqual({ decision: { outcome: "skipped", reason: "daily_cap" } });
    expect(reasons("heartbeat skipped")).toEqual(["daily cap reached: 1 of 1 check-ins delivered today (2026-03-05 Asia/Shanghai)"]);
    expect(mock.getRequests()).toHaveLength(2);
  });

  it("keeps its check-ins as the job state of @heartbeat, which a pause and a resume leave as they are", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    agentReplies({ notify: true, message: "Water the plants today." });
    const hb = await service();
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    const checkIns = {
      delivered: [{ at: "2026-03-05T01:00:00.000Z", hash: messageHash("Water the plants today.") }],
      lastContactAt: "2026-03-05T01:00:00.000Z",
    };
    const onDisk = async () => JSON.parse(await readFile(join(stateDir, "state.json"), "utf8")) as Record<string, unknown>;
    expect(await onDisk()).toEqual({ jobs: { "@heartbeat": { checkIns } }, running: {} });

    await hb.state.pause("@heartbeat", new Date("2026-03-05T02:00:00.000Z"));
    expect(hb.state.job("@heartbeat")).toEqual({ checkIns, pausedAt: "2026-03-05T02:00:00.000Z" });
    await hb.state.resume("@heartbeat");
    await hb.state.close();
    expect(await onDisk()).toEqual({ jobs: { "@heartbeat": { checkIns } }, running: {} });
  });

  it("forgets delivered check-ins older than two days when it records a new one", async () => {
    await writeChecklist(OPEN_CHECKLIST);
    const state = await StateStore.open(stateDir);
    await state.update((d) => {
      checkInsToChange(d).delivered.push(
        { at: "2026-03-01T01:00:00.000Z", hash: "old" },
        { at: "2026-03-04T01:00:00.000Z", hash: "recent" },
      );
    });
    agentReplies({ notify: true, message: "Water the plants today." });
    const hb = await service();
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    expect(checkInsOf(hb.state.data).delivered.map((d) => d.hash)).toEqual(["recent", messageHash("Water the plants today.")]);
  });

  it("greets once a day when there is no checklist", async () => {
    const hb = await service();
    agentReplies({ notify: true, message: "Good morning! Nothing urgent today." });
    expect(await hb.tick()).toMatchObject({ decision: { outcome: "sent" } });
    advance(5 * HOUR);
    expect(await hb.tick()).toEqual({ decision: { outcome: "skipped", reason: "nothing_to_do" } });
    expect(reasons("heartbeat skipped")).toEqual([
      "nothing to do: no checklist file, and a check-in was already delivered today (2026-03-05 Asia/Shanghai)",
    ]);
    expect(sent()).toEqual(["Good morning! Nothing urgent today."]);
  });
});
