import type { ApprovalDesk } from "../approvals/desk.js";
import type { WaitingRun } from "./protocol.js";

/**
 * The runs that wait for an answer, read from the approvals kept (every node's in a cluster),
 * oldest request first: the one waiting longest is the one to answer first.
 */
export async function waitingRuns(desk: ApprovalDesk | undefined): Promise<WaitingRun[]> {
  if (!desk) return [];
  return (await desk.list())
    .filter((approval) => approval.status === "waiting")
    .sort((a, b) => Date.parse(a.askedAt) - Date.parse(b.askedAt))
    .map((approval) => ({
      job: approval.job,
      run: approval.run,
      approval: approval.id,
      tool: approval.tool,
      asked_at: approval.askedAt,
      expires_at: approval.expiresAt,
    }));
}
