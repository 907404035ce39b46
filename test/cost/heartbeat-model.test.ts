import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { HEARTBEAT_JOB } from "../../src/store/run-record.js";
import { startCachingLlm, type CachingLlm } from "../support/caching-llm.js";
import { openCheckInStack, type CheckInStack } from "../support/check-in-stack.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The heartbeat on a cheaper model than the jobs': countd.yaml's heartbeat.provider/model, wired
 * as the daemon wires it (HeartbeatService → runCheckIn → the runner → the runtime's provider),
 * against one loopback server speaking both wire formats. The jobs use openai's gpt-4o-mini; the
 * heartbeat anthropic's claude-haiku-4-5 (table: input 1, output 5 USD per million tokens).
 * Every call reports 2,000 input and 100 output tokens: a heartbeat call costs
 * 2,000 × 1 + 100 × 5 = $0.0025, a job call 2,000 × 0.15 + 100 × 0.60 = $0.00036.
 */

const HEARTBEAT_MODEL = "claude-haiku-4-5";
const JOB_MODEL = "gpt-4o-mini";
const USAGE = { input: 2_000, output: 100 };

describe("the heartbeat's own provider, model and budget", () => {
  let server: CachingLlm;
  let receiver: WebhookReceiver;
  let dir: string;
  let stack: CheckInStack;
  let clock: Date;
  /** What the heartbeat's agent does when asked: tell the user, or stay silent. */
  let notify: boolean;

  beforeAll(async () => {
    server = await startCachingLlm();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await server.close();
    await receiver.close();
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-heartbeat-cost-"));
    server.requests.length = 0;
    receiver.requests.length = 0;
    clock = new Date("2026-11-30T09:00:00Z");
    notify = true;
    server.answer(({ format, body }) => {
      if (format === "openai") return { text: "Job done.", usage: USAGE };
      const answered = JSON.stringify(body.messages).includes('"tool_result"');
      return answered
        ? { text: "HEARTBEAT_OK", usage: USAGE }
        : {
            toolCalls: [{ name: "heartbeat_respond", arguments: { notify, message: notify ? "The plants need water today." : "" } }],
            usage: USAGE,
          };
    });
  });
  afterEach(async () => {
    await stack.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function open(budget = ""): Promise<CheckInStack> {
    const yaml = [
      `provider:\n  preset: openai\n  model: ${JOB_MODEL}`,
      "timezone: UTC",
      "tools:\n  exec:\n    sandbox: none",
      "heartbeat:",
      "  enabled: true",
      "  active_hours: 08:00-21:00",
      "  provider: anthropic",
      `  model: ${HEARTBEAT_MODEL}`,
      ...(budget ? [`  budget: ${budget}`] : []),
      "  deliver:",
      `    - webhook: { url: "${receiver.url}" }`,
    ].join("\n");
    const env = {
      OPENAI_BASE_URL: `${server.url}/v1`,
      OPENAI_API_KEY: "sk-test-openai-0123456789",
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: "sk-ant-test-0123456789",
    };
    stack = await openCheckInStack({ dir, yaml, env, now: () => clock });
    await writeFile(stack.config.heartbeat.checklist, "# Heartbeat\n- [ ] remind me to water the plants\n");
    stack.job("report", "Write the report");
    return stack;
  }

  it("asks the heartbeat's model through the heartbeat's provider, and the jobs' model for a job, each priced as its own", async () => {
    const heartbeat = await open();

    expect(await heartbeat.tick()).toMatchObject({ decision: { outcome: "sent" }, run: { resultExcerpt: "The plants need water today." } });
    expect(await stack.run("report")).toMatchObject({ status: "ok", model: JOB_MODEL, cost: expect.closeTo(0.00036, 12) });

    expect(server.requests.map((request) => [request.format, request.model])).toEqual([
      ["anthropic", HEARTBEAT_MODEL],
      ["anthropic", HEARTBEAT_MODEL],
      ["openai", JOB_MODEL],
    ]);
    const [checkIn] = await stack.state.runs(HEARTBEAT_JOB);
    expect(checkIn).toMatchObject({ reason: "heartbeat", status: "ok", model: HEARTBEAT_MODEL, cost: expect.closeTo(2 * 0.0025, 12) });
    expect(receiver.requests).toHaveLength(1);
    expect(JSON.parse(receiver.requests[0]!.body)).toMatchObject({ type: "heartbeat", result: "The plants need water today." });
  });

  it("stops a check-in at the heartbeat's own budget before any request, and the jobs run on", async () => {
    // The first check-in (two calls, $0.0050) passes the heartbeat's $0.0040 a day.
    const heartbeat = await open("{ per_day: 0.004 }");
    notify = false;
    expect(await heartbeat.tick()).toMatchObject({ decision: { outcome: "silent" } });
    expect(server.requests).toHaveLength(2);

    clock = new Date("2026-11-30T09:30:00Z");
    const stopped = await heartbeat.tick();
    expect(server.requests).toHaveLength(2);
    expect(stopped).toMatchObject({
      decision: { outcome: "failed" },
      run: { status: "budget", error: expect.stringContaining("the heartbeat's daily budget of $0.0040 is spent") },
    });
    const runs = await stack.state.runs(HEARTBEAT_JOB);
    expect(runs.map((run) => run.status)).toEqual(["ok", "budget"]);
    expect(runs[1]!.error).toBe("the heartbeat's daily budget of $0.0040 is spent: its runs have cost $0.0050 on 2026-11-30 (UTC)");

    // The cap is the heartbeat's: a job's run is not stopped by it.
    expect(await stack.run("report")).toMatchObject({ status: "ok", model: JOB_MODEL });
    expect(server.requests.at(-1)).toMatchObject({ format: "openai", model: JOB_MODEL });
    expect(receiver.requests).toEqual([]);
  });

  it("decides to stay silent without a request, whatever model it would use", async () => {
    const heartbeat = await open();
    clock = new Date("2026-11-30T22:00:00Z"); // outside 08:00-21:00

    expect(await heartbeat.tick()).toEqual({ decision: { outcome: "skipped", reason: "outside_active_hours" } });
    expect(server.requests).toEqual([]);
    expect(await stack.state.runs(HEARTBEAT_JOB)).toEqual([]);
  });
});
