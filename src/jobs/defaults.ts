import type { Job } from "./types.js";

/** What a job states itself: a Job is these and jobDefaults(). */
export type JobIdentity = Pick<Job, "name" | "file" | "prompt" | "timezone">;

/**
 * What a job file gets for every field it leaves out (jobs/schema.ts writes the same defaults
 * into the JSON Schema; a test holds the two together). Jobs countd makes itself, such as the
 * heartbeat's, and tests start from here and change only what differs.
 */
export function jobDefaults(): Omit<Job, keyof JobIdentity> {
  return {
    enabled: true,
    session: "isolated",
    overrides: {},
    timeoutMs: 10 * 60_000,
    overlap: "skip",
    catchUpMs: 60 * 60_000,
    retry: { attempts: 1, backoffMs: 60_000 },
    deliver: [],
    deliverWhen: "always",
    onFailure: [],
    onFailureRepeatMs: 60 * 60_000,
  };
}
