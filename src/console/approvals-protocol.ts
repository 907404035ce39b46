import type { ApprovalAnswer } from "../approvals/links.js";
import type { OnTimeout } from "../approvals/rules.js";
import { approvalView, type AnsweredBy, type Approval } from "../approvals/types.js";

/*
 * What the approval endpoints answer (src/console/approvals-api.ts), for the page's type check
 * as protocol.ts is for the rest of the API.
 */

/** One approval as shown: `approvalView`'s shape. */
export interface ApprovalItem {
  id: string;
  job: string;
  run: string;
  tool: string;
  arguments: unknown;
  hash: string;
  rule: string;
  asked_at: string;
  expires_at: string;
  on_timeout: OnTimeout;
  reasoning: string;
  status: Approval["status"];
  answer?: { answer: ApprovalAnswer | "timeout"; via: AnsweredBy["via"]; by: string; at: string; note?: string };
  node?: string;
}

/** GET /api/approvals: the waiting ones first (soonest to expire on top), then those answered, newest first. */
export interface ApprovalsView {
  approvals: ApprovalItem[];
}

/** POST /api/approvals/:id/approve and /deny: the approval as answered. */
export interface ApprovalAnswerView {
  approval: ApprovalItem;
}

export const approvalItem = (approval: Approval): ApprovalItem => approvalView(approval) as unknown as ApprovalItem;
