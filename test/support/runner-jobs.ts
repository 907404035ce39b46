import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { Runner } from "../../src/runner/runner.js";
import type { FireRequest } from "../../src/runner/types.js";
import type { RunRecord } from "../../src/store/run-record.js";

/** A job as the runner tests hand it over: no catch-up, one attempt, a minute to run. */
export function makeJob(name: string, overrides: Partial<Job> = {}): Job {
  return {
    name,
    file: `/jobs/${name}.yaml`,
    timezone: "UTC",
    prompt: `run ${name}`,
    ...jobDefaults(),
    timeoutMs: 60_000,
    catchUpMs: 0,
    retry: { attempts: 1, backoffMs: 0 },
    ...overrides,
  };
}

/** A scheduled fire of `job`, at a fixed slot. */
export const fire = (job: string, extra: Partial<FireRequest> = {}): FireRequest => ({
  job,
  reason: "schedule",
  scheduledAt: new Date("2026-11-30T09:00:00Z"),
  ...extra,
});

/** A fire's final record once it ended, as `countd run` waits for it: after the last retry, or skipped. */
export async function finalRecord(runner: Pick<Runner, "request">, request: FireRequest): Promise<RunRecord> {
  return (await runner.request(request).ended).record;
}

/** A manual run of `report` that ended ok at 09:01 on 2 December, as the run history keeps it. */
export function endedRun(id: string, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    id,
    job: "report",
    reason: "manual",
    scheduledAt: "2026-12-02T09:00:00.000Z",
    startedAt: "2026-12-02T09:00:00.000Z",
    finishedAt: "2026-12-02T09:01:00.000Z",
    status: "ok",
    iterations: 1,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `manual:report:${id}`,
    ...overrides,
  };
}
