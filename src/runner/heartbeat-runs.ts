import { setTimeout as sleep } from "node:timers/promises";
import type { Config } from "../config/schema.js";
import { message } from "../delivery/dispatch.js";
import type { Outbox } from "../delivery/outbox.js";
import type { Job } from "../jobs/types.js";
import type { Runtime } from "../runtime.js";
import type { Tool } from "../tools/registry.js";
import { runAgent } from "./execute.js";
import type { Runner } from "./runner.js";
import { HEARTBEAT_JOB, type RunContext, type RunOutcome, type RunRecord } from "./types.js";

export { HEARTBEAT_JOB };

/** How long a check-in may take to be acknowledged before it does not count toward the daily cap. */
const DELIVERY_WAIT_MS = 60_000;

/**
 * The heartbeat's agent runs go through the runner like a job's: recorded with reason
 * `heartbeat`, timed out, and counted in the concurrency limit. Runs never overlap (`skip`), so
 * the prompt of the run being started is simply the latest one handed over.
 */
export class HeartbeatRuns {
  private next: { prompt: string; tools: Tool[] } | undefined;
  private answer = "";

  constructor(private readonly runtime: () => Runtime) {}

  job(config: Config): Job {
    return {
      name: HEARTBEAT_JOB,
      file: config.file ?? "countd.yaml",
      enabled: config.heartbeat.enabled,
      timezone: config.heartbeat.timezone,
      prompt: "",
      session: "isolated",
      overrides: {},
      tools: [],
      timeoutMs: 10 * 60_000,
      overlap: "skip",
      catchUpMs: 0,
      retry: { attempts: 1, backoffMs: 0 },
      deliver: [],
      onFailure: [],
      deliverWhen: "always",
    };
  }

  /** For the HeartbeatService: one agent run with the heartbeat prompt and reply tool; its answer and final record. */
  async run(runner: Runner, prompt: string, tools: Tool[]): Promise<{ answer: string; run: RunRecord }> {
    this.next = { prompt, tools };
    const record = await runner.run({ job: HEARTBEAT_JOB, reason: "heartbeat", scheduledAt: new Date() });
    if (record.status !== "ok") throw new Error(`heartbeat run ${record.id} ${record.status}: ${record.error ?? ""}`);
    return { answer: this.answer, run: record };
  }

  async execute(run: RunContext): Promise<RunOutcome> {
    const { prompt, tools } = this.next ?? { prompt: "", tools: [] };
    const outcome = await runAgent(this.runtime().loop({ toolNames: [], extraTools: tools }), prompt, run.sessionId, run.cancel);
    this.answer = outcome.answer;
    return outcome;
  }
}

/**
 * Queues the check-in `run` produced and resolves once every target acknowledged it: only a
 * delivered check-in counts toward the daily cap. One still pending after a minute (mail server
 * down) rejects, so it does not count; the outbox goes on delivering it. The message carries the
 * run as a job's report does (X-Countd-Run, the webhook's run.id), and is keyed like one,
 * `@heartbeat.<run id>`, which no job's key can be.
 */
export async function deliverCheckIn(outbox: Outbox, config: Config, text: string, run: RunRecord): Promise<void> {
  const ids = await outbox.enqueue(
    `${HEARTBEAT_JOB}.${run.id}`,
    config.heartbeat.deliver,
    { ...message("heartbeat", HEARTBEAT_JOB, run, text), persona: config.persona.name },
    config.paths.workspace,
  );
  const deadline = Date.now() + DELIVERY_WAIT_MS;
  while (ids.some((id) => !outbox.deliveredAt(id))) {
    const dead = outbox.list().dead.find((entry) => ids.includes(entry.id));
    if (dead) throw new Error(`check-in not delivered: ${dead.lastError ?? "dead"}`);
    if (Date.now() > deadline) throw new Error("check-in not acknowledged within a minute; the outbox keeps trying");
    await sleep(250);
  }
}
