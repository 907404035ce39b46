import type { Config } from "../config/schema.js";
import type { RunDispatcher } from "../delivery/dispatch.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { jobDefaults } from "../jobs/defaults.js";
import type { Job } from "../jobs/types.js";
import type { Tool } from "../tools/types.js";
import type { Runner } from "./runner.js";
import { HEARTBEAT_JOB, type RunRecord } from "../store/run-record.js";

export { HEARTBEAT_JOB };

/** How long a check-in may take to be acknowledged before it does not count toward the daily cap. */
const DELIVERY_WAIT_MS = 60_000;

/**
 * The heartbeat's runs go through the runner like a job's: recorded with reason `heartbeat`,
 * timed out, and counted in the concurrency limit. Its job never overlaps (`skip`) and has no
 * prompt or tools of its own: each fire brings them.
 */
export function heartbeatJob(config: Config): Job {
  return {
    name: HEARTBEAT_JOB,
    file: config.file ?? "countd.yaml",
    timezone: config.heartbeat.timezone,
    prompt: "",
    ...jobDefaults(),
    enabled: config.heartbeat.enabled,
    // Its one tool, the reply tool, comes with each fire; the heartbeat's own timer, not a catch-up, decides when it runs.
    tools: [],
    catchUpMs: 0,
    overrides: { provider: config.heartbeat.provider, model: config.heartbeat.model },
    budget: config.heartbeat.budget,
  };
}

/** The jobs the runner looks up: the job files' and, under its reserved name, the heartbeat's. */
export function withHeartbeat(jobs: (name: string) => Job | undefined, config: () => Config): (name: string) => Job | undefined {
  return (name) => (name === HEARTBEAT_JOB ? heartbeatJob(config()) : jobs(name));
}

/** For the HeartbeatService: one agent run with the heartbeat prompt and reply tool; its answer and final record. */
export async function runCheckIn(runner: Runner, prompt: string, tools: Tool[]): Promise<{ answer: string; run: RunRecord }> {
  const { record, outcome } = await runner.request({
    job: HEARTBEAT_JOB,
    reason: "heartbeat",
    scheduledAt: new Date(),
    prompt,
    extraTools: tools,
  }).ended;
  if (record.status !== "ok") throw new Error(`heartbeat run ${record.id} ${record.status}: ${record.error ?? ""}`);
  return { answer: outcome?.answer ?? "", run: record };
}

/**
 * Queues the check-in `run` produced through the dispatcher and resolves once every target
 * acknowledged it: only a delivered check-in counts toward the daily cap. One still pending after
 * a minute (mail server down) rejects, so it does not count; the outbox goes on delivering it.
 */
export async function deliverCheckIn(
  dispatcher: RunDispatcher,
  outbox: Pick<DeliveryOutbox, "settled">,
  config: Config,
  text: string,
  run: RunRecord,
): Promise<void> {
  const ids = await dispatcher.checkIn(run, config.heartbeat.deliver, text, config.persona.name, config.heartbeat.timezone);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), DELIVERY_WAIT_MS)));
  try {
    const settled = await Promise.race([outbox.settled(ids), late]);
    if (settled === "late") throw new Error("check-in not acknowledged within a minute; the outbox keeps trying");
    const dead = settled.find((s) => !s.delivered);
    if (dead && !dead.delivered) throw new Error(`check-in not delivered: ${dead.error}`);
  } finally {
    clearTimeout(timer);
  }
}
