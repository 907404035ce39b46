import { describe, expect, it } from "vitest";
import { jobOfSession, runSessionId, sharedSessionId } from "../../src/runner/session-ids.js";

describe("session ids", () => {
  it("names a shared job's one session and an isolated run's own, and reads the job back from both", () => {
    expect(sharedSessionId("daily-report")).toBe("cron:daily-report");
    expect(runSessionId("daily-report", "shared", "20261130T090000Z-3f2a")).toBe("cron:daily-report");
    expect(runSessionId("daily-report", "isolated", "20261130T090000Z-3f2a")).toBe("cron:daily-report:20261130T090000Z-3f2a");
    expect(jobOfSession("cron:daily-report")).toBe("daily-report");
    expect(jobOfSession("cron:daily-report:20261130T090000Z-3f2a")).toBe("daily-report");
    expect(jobOfSession("cron:@heartbeat:20261130T090000Z-3f2a")).toBe("@heartbeat");
  });

  it("finds no job in the sessions of countd ask and subagents, nor in a look-alike prefix", () => {
    expect(jobOfSession("cli")).toBeUndefined();
    expect(jobOfSession("subagent:1a2b3c4d")).toBeUndefined();
    expect(jobOfSession("cron:")).toBeUndefined();
    expect(jobOfSession("cronjob:daily")).toBeUndefined();
  });
});
