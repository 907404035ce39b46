import type { ApprovalView } from "../approvals/types.js";

/*
 * What the approval endpoints answer (src/console/approvals-api.ts), for the page's type check
 * as protocol.ts is for the rest of the API.
 */

/** One approval as shown. */
export type ApprovalItem = ApprovalView;

/** GET /api/approvals: the waiting ones first (soonest to expire on top), then those answered, newest first. */
export interface ApprovalsView {
  approvals: ApprovalItem[];
}

/** POST /api/approvals/:id/approve and /deny: the approval as answered. */
export interface ApprovalAnswerView {
  approval: ApprovalItem;
}
