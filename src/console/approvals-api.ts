import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { ApprovalDesk } from "../approvals/desk.js";
import { approvalView, type AnsweredBy, type AnswerResult, type Approval } from "../approvals/types.js";
import { ApiError } from "./api-error.js";
import type { Guard } from "./guard.js";
import type { ApprovalAnswerView, ApprovalsView } from "./approvals-protocol.js";
import type { ConsoleEnv } from "./sign-in.js";

/** A note or a reason is a sentence or a paragraph for the run's journal, not a document. */
export const MAX_NOTE = 2_000;
/** A login name as `countd approve` sends it. */
const MAX_BY = 64;
/** A body holding a note and a login name. */
const MAX_BODY = 16 * 1024;

/**
 * The approvals under /api/: what waits and what was answered, and the console's and the CLI's
 * answers. They pass the guard of every /api/ route (the token, the socket, or the cookie with
 * the CSRF proof); the answer records which session or which user gave it.
 */
export function approvalRoutes(app: Hono<ConsoleEnv>, desk: ApprovalDesk | undefined, guard: Guard, safe: <T>(value: T) => T): void {
  const limit = bodyLimit({
    maxSize: MAX_BODY,
    onError: () => {
      throw new ApiError(413, `the body is over ${MAX_BODY} bytes`);
    },
  });
  const enabled = (): ApprovalDesk => {
    if (!desk) throw new ApiError(404, "approvals are not enabled");
    return desk;
  };

  app.get("/api/approvals", async (c) => {
    const all = await enabled().list();
    return c.json(safe<ApprovalsView>({ approvals: ordered(all).map(approvalView) }));
  });

  const answer = (answer: ApprovalAnswer, noteField: "note" | "reason") => async (c: Context<ConsoleEnv>) => {
    const id = c.req.param("id")!;
    const body = await bodyOf(c, [noteField, "by"]);
    const note = text(body, noteField, MAX_NOTE);
    const given = text(body, "by", MAX_BY);
    const credential = c.get("credential");
    // A browser's session names itself; only countd's own commands (the socket, the token) say which user runs them.
    if (credential === "cookie" && given !== undefined)
      throw new ApiError(400, "by is for countd approve and countd deny; the console names its session itself");
    const by: AnsweredBy =
      credential === "cookie"
        ? { via: "console", by: guard.sessionName(c.req.raw.headers) }
        : { via: "cli", by: given ?? (credential === "socket" ? "countd on the control socket" : "the console token") };
    const result = await enabled().answer(id, answer, { ...by, ...(note !== undefined ? { note } : {}) });
    return c.json(safe<ApprovalAnswerView>({ approval: approvalView(answered(id, result)) }));
  };
  app.post("/api/approvals/:id/approve", limit, answer("approve", "note"));
  app.post("/api/approvals/:id/deny", limit, answer("deny", "reason"));
}

type ApprovalAnswer = "approve" | "deny";

/** Waiting first, the soonest to expire on top of those; then the answered ones, newest first. */
function ordered(all: Approval[]): Approval[] {
  const waiting = all.filter((a) => a.status === "waiting").sort((a, b) => a.expiresAt.localeCompare(b.expiresAt));
  const rest = all.filter((a) => a.status !== "waiting").sort((a, b) => b.askedAt.localeCompare(a.askedAt));
  return [...waiting, ...rest];
}

function answered(id: string, result: AnswerResult): Approval {
  if (result.ok) return result.approval;
  if (result.why === "unknown") throw new ApiError(404, `no approval with id "${id}"`);
  const approval = result.approval!;
  if (result.why === "expired" || approval.answer?.answer === "timeout")
    throw new ApiError(409, `approval ${id} expired at ${approval.expiresAt}: it can no longer be answered`);
  const { answer } = approval;
  throw new ApiError(
    409,
    `approval ${id} was already answered: ${approval.status}${answer ? ` by ${answer.by} (${answer.via}) at ${answer.at}` : ""}`,
  );
}

/** The JSON object a POST carries (an empty body is an empty object), with no field but `known`. */
async function bodyOf(c: Context<ConsoleEnv>, known: string[]): Promise<Record<string, unknown>> {
  const raw = await c.req.text();
  if (raw.trim() === "") return {};
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new ApiError(400, `the body is not JSON: ${JSON.stringify(raw.slice(0, 80))}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ApiError(400, `the body must be a JSON object, got ${JSON.stringify(body)}`);
  const unknown = Object.keys(body).filter((key) => !known.includes(key));
  if (unknown.length > 0) throw new ApiError(400, `unknown field ${unknown.map((key) => `"${key}"`).join(", ")}: give ${known.join(", ")}`);
  return body as Record<string, unknown>;
}

/** A text field, trimmed; empty counts as not given. Control characters would reach terminals that show the journal. */
function text(body: Record<string, unknown>, field: string, max: number): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new ApiError(400, `${field} must be text, got ${JSON.stringify(value)}`);
  const cleaned = value.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, " ").trim();
  if (cleaned.length > max) throw new ApiError(400, `${field} is ${cleaned.length} characters long; at most ${max}`);
  return cleaned === "" ? undefined : cleaned;
}
