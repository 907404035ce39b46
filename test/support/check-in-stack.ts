import { mkdir } from "node:fs/promises";
import type { CountdEvents } from "../../src/events.js";
import { heartbeatJob } from "../../src/jobs/heartbeat.js";
import type { Logger } from "../../src/log.js";
import { HEARTBEAT_JOB, type RunRecord } from "../../src/store/run-record.js";
import { CheckIns } from "../../src/triggers/check-ins.js";
import { openStack, type CostStack, type StackOptions } from "./cost-stack.js";

/*
 * The heartbeat as the daemon wires it, without the cron trigger: its job, its gate and its
 * executor (triggers/check-ins.ts) over the real pipeline of cost-stack.ts. A test ticks by hand.
 */

export interface CheckInStack extends CostStack {
  checkIns: CheckIns;
  /** One scheduled tick at the stack's clock: the gate, the run if admitted, and how it was decided once settled. */
  tick(): Promise<{ decision: CountdEvents["heartbeat.decision"]; run?: RunRecord }>;
}

export async function openCheckInStack(
  opts: Omit<StackOptions, "lookup" | "wrap"> & { lastExchange?: () => Promise<Date | undefined>; log?: Logger },
): Promise<CheckInStack> {
  let checkIns: CheckIns | undefined;
  const stack = await openStack({
    ...opts,
    lookup: (jobs, config) => (name) => (name === HEARTBEAT_JOB ? heartbeatJob(config()) : jobs.get(name)),
    wrap: (execute) => (job, run) => checkIns!.executor(execute)(job, run),
  });
  await mkdir(stack.config.paths.workspace, { recursive: true });
  checkIns = new CheckIns({
    config: () => stack.config,
    state: stack.state,
    memory: () => stack.runtime.memory,
    outbox: () => stack.pipeline.outbox,
    events: stack.runtime.events,
    redactor: () => stack.runtime.redactor,
    ...(opts.lastExchange ? { lastExchange: opts.lastExchange } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.log ? { log: opts.log } : {}),
  });
  const ready = checkIns;
  return {
    ...stack,
    checkIns: ready,
    async tick() {
      const decided = new Promise<CountdEvents["heartbeat.decision"]>((resolve) => {
        const off = stack.runtime.events.on("heartbeat.decision", (decision) => {
          off();
          resolve(decision);
        });
      });
      const scheduledAt = opts.now?.() ?? new Date();
      const admitted = await ready.admit({ job: HEARTBEAT_JOB, reason: "schedule", scheduledAt });
      const run = admitted ? (await stack.pipeline.runner.request(admitted).ended).record : undefined;
      return { decision: await decided, ...(run ? { run } : {}) };
    },
    async close() {
      ready.close();
      await stack.close();
    },
  };
}
