import type { Job } from "../jobs/types.js";

/**
 * The one module that builds and reads the session ids of job runs: `cron:<job>` for a `shared`
 * job, whose runs continue one history, and `cron:<job>:<run id>` for an isolated run. Job names
 * hold no ":" (the job schema), so the job is whatever lies between the first two.
 */
const PREFIX = "cron:";

export function sharedSessionId(job: string): string {
  return `${PREFIX}${job}`;
}

export function runSessionId(job: string, session: Job["session"], runId: string): string {
  return session === "shared" ? sharedSessionId(job) : `${sharedSessionId(job)}:${runId}`;
}

/** The job a session belongs to (`@heartbeat` for the heartbeat's); undefined for sessions of no job (`countd ask`, subagents). */
export function jobOfSession(sessionId: string): string | undefined {
  if (!sessionId.startsWith(PREFIX)) return undefined;
  const job = sessionId.slice(PREFIX.length).split(":", 1)[0]!;
  return job === "" ? undefined : job;
}
