import type { Config } from "../config/schema.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { jobDefaults } from "./defaults.js";
import type { Job } from "./types.js";

/**
 * countd.yaml's `heartbeat:` as the job `@heartbeat`: fired by the cron trigger every
 * `heartbeat.every`, its answer (the check-in, empty when the agent stays silent) delivered to
 * `heartbeat.deliver`. Its prompt and reply tool are the heartbeat's own (triggers/check-ins.ts),
 * and its rules decide before each scheduled fire whether the agent is asked at all.
 */
export function heartbeatJob(config: Config): Job {
  const heartbeat = config.heartbeat;
  return {
    name: HEARTBEAT_JOB,
    file: config.file ?? "countd.yaml",
    description: "the heartbeat: checks in when there is something worth saying (countd.yaml heartbeat:)",
    timezone: heartbeat.timezone,
    prompt: "",
    ...jobDefaults(),
    enabled: heartbeat.enabled,
    schedule: { kind: "every", intervalMs: heartbeat.everyMs },
    // Its one tool, the reply tool, comes with each run; a missed tick is not worth a catch-up.
    tools: [],
    catchUpMs: 0,
    overrides: { provider: heartbeat.provider, model: heartbeat.model },
    budget: heartbeat.budget,
    deliver: heartbeat.deliver,
    deliverWhen: "non_empty",
    checkIn: { persona: config.persona.name },
  };
}

/** The jobs countd.yaml defines besides the job files: the heartbeat, while it is enabled. */
export function builtInJobs(config: Config): Job[] {
  return config.heartbeat.enabled ? [heartbeatJob(config)] : [];
}
