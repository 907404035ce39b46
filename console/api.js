// @ts-check
/**
 * The daemon's JSON API. The sign-in cookie is HttpOnly and holds a session id, never the token;
 * what the page holds is its session's CSRF proof from /api/session, which every change must carry.
 *
 * Each endpoint the page uses is a function here that returns its answer's shape from
 * src/console/protocol.ts: `npm test` type-checks the page against it (tsconfig.console.json),
 * so a field renamed or removed on the server fails there, not in a user's browser.
 */

/**
 * @typedef {import("../src/console/protocol.js").SessionView} SessionView
 * @typedef {import("../src/console/protocol.js").SignOutAnswer} SignOutAnswer
 * @typedef {import("../src/console/protocol.js").StatusView} StatusView
 * @typedef {import("../src/console/protocol.js").JobsView} JobsView
 * @typedef {import("../src/console/protocol.js").JobAnswer} JobAnswer
 * @typedef {import("../src/console/protocol.js").StatsView} StatsView
 * @typedef {import("../src/console/protocol.js").RunsPage} RunsPage
 * @typedef {import("../src/console/protocol.js").RunView} RunView
 * @typedef {import("../src/console/protocol.js").OutboxView} OutboxView
 * @typedef {import("../src/console/protocol.js").RunNowAnswer} RunNowAnswer
 * @typedef {import("../src/console/protocol.js").PauseAnswer} PauseAnswer
 * @typedef {import("../src/console/protocol.js").CancelAnswer} CancelAnswer
 * @typedef {import("../src/console/protocol.js").RetryAnswer} RetryAnswer
 * @typedef {import("../src/console/protocol.js").PurgeAnswer} PurgeAnswer
 * @typedef {import("../src/console/rehearsal-protocol.js").RehearsalStarted} RehearsalStarted
 * @typedef {import("../src/console/rehearsal-protocol.js").RehearsalView} RehearsalView
 * @typedef {import("../src/console/approvals-protocol.js").ApprovalsView} ApprovalsView
 * @typedef {import("../src/console/approvals-protocol.js").ApprovalAnswerView} ApprovalAnswerView
 */

const CSRF_HEADER = "x-countd-csrf";

let csrf = "";
/** @type {Set<() => void>} */
const signedOutListeners = new Set();

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   * @param {unknown} [body] what the daemon answered, when it did
   */
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/**
 * Called once the daemon answers 401: the cookie is gone or the token changed.
 * @param {() => void} listener
 */
export function onSignedOut(listener) {
  signedOutListeners.add(listener);
}

/** @returns {Promise<SessionView>} */
export const session = () => get("/api/session");

export async function startSession() {
  const answer = await session();
  csrf = answer.csrf;
  return answer;
}

/**
 * Ends this browser's session on the daemon (the cookie alone would outlive a closed tab), then
 * shows the sign-in screen.
 * @returns {Promise<SignOutAnswer>}
 */
export async function signOut() {
  const answer = await post("/api/sign-out");
  for (const listener of signedOutListeners) listener();
  return answer;
}

/** @returns {Promise<StatusView>} */
export const status = () => get("/api/status");

/** @returns {Promise<JobsView>} */
export const jobs = () => get("/api/jobs");

/**
 * @param {string} name
 * @returns {Promise<JobAnswer>}
 */
export const job = (name) => get(`/api/jobs/${enc(name)}`);

/**
 * Runs per day over the last `days`, of one job (with each run's points) or of all.
 * @param {number} days
 * @param {string} [job]
 * @returns {Promise<StatsView>}
 */
export const stats = (days, job) => get(`/api/stats?${job !== undefined ? `job=${enc(job)}&` : ""}days=${days}`);

/**
 * A page of a job's runs, newest first; `before` is the previous page's `next`.
 * @param {string} job
 * @param {number} limit
 * @param {string} [before]
 * @returns {Promise<RunsPage>}
 */
export const runs = (job, limit, before) => get(`/api/runs?job=${enc(job)}&limit=${limit}${before ? `&before=${enc(before)}` : ""}`);

/**
 * @param {string} job
 * @param {string} id
 * @returns {Promise<RunView>}
 */
export const run = (job, id) => get(`/api/runs/${enc(id)}?job=${enc(job)}`);

/** @returns {Promise<OutboxView>} */
export const outbox = () => get("/api/outbox");

/**
 * A fire the job's overlap policy skipped answers 409 with why: that is an answer, not a failure.
 * @param {string} name
 * @returns {Promise<RunNowAnswer>}
 */
export async function runNow(name) {
  try {
    return await post(`/api/jobs/${enc(name)}/run`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 409 && isSkipped(error.body)) return error.body;
    throw error;
  }
}

/**
 * @param {unknown} body
 * @returns {body is Extract<RunNowAnswer, { status: "skipped" }>}
 */
const isSkipped = (body) => typeof body === "object" && body !== null && "status" in body && body.status === "skipped";

/**
 * One job, or every job when `name` is undefined.
 * @param {boolean} paused
 * @param {string} [name]
 * @returns {Promise<PauseAnswer>}
 */
export const setPaused = (paused, name) => post(`/api${name !== undefined ? `/jobs/${enc(name)}` : ""}/${paused ? "pause" : "resume"}`);

/**
 * @param {string} job
 * @param {string} id
 * @returns {Promise<CancelAnswer>}
 */
export const cancelRun = (job, id) => post(`/api/runs/${enc(id)}/cancel?job=${enc(job)}`);

/**
 * @param {string} id
 * @returns {Promise<RetryAnswer>}
 */
export const retryDelivery = (id) => post(`/api/outbox/${enc(id)}/retry`);

/**
 * A delivery held by `on_verify_fail: hold`, sent now.
 * @param {string} id
 * @returns {Promise<import("../src/console/protocol.js").ReleaseAnswer>}
 */
export const releaseDelivery = (id) => post(`/api/outbox/${enc(id)}/release`);

/** @returns {Promise<PurgeAnswer>} */
export const purgeOutbox = () => post("/api/outbox/purge");

/**
 * A rehearsal of the job: it runs in the daemon; the answer is its id, to follow with `rehearsal`.
 * @param {string} name
 * @param {{ at?: string; files?: string[]; payload?: string }} fire
 * @returns {Promise<RehearsalStarted>}
 */
export const rehearse = (name, fire) => post(`/api/jobs/${enc(name)}/rehearse`, fire);

/**
 * A replay of the run, or with a change a fork of it.
 * @param {string} job
 * @param {string} id
 * @param {{ model?: string; prompt?: string; system_prompt?: string }} changes
 * @returns {Promise<RehearsalStarted>}
 */
export const replay = (job, id, changes) => post(`/api/runs/${enc(id)}/replay`, { job, ...changes });

/**
 * @param {string} id
 * @returns {Promise<RehearsalView>}
 */
export const rehearsal = (id) => get(`/api/rehearsals/${enc(id)}`);

/**
 * Where a rehearsal's captured file is served: a mail's HTML is shown from it in a sandboxed frame.
 * @param {string} id
 * @param {string} file deliveries/<name>
 */
export const rehearsalFile = (id, file) => `/api/rehearsals/${enc(id)}/files/${file.split("/").map(enc).join("/")}`;

/**
 * A captured file's text: a webhook's headers and body.
 * @param {string} id
 * @param {string} file
 * @returns {Promise<string>}
 */
export async function rehearsalText(id, file) {
  const response = await fetch(rehearsalFile(id, file), { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) throw new ApiError(response.status, `${file}: HTTP ${response.status}`);
  return response.text();
}

/** @returns {Promise<ApprovalsView>} */
export const approvals = () => get("/api/approvals");

/**
 * A waiting tool call let through, or denied: the daemon records this browser's session as who answered.
 * @param {string} id
 * @param {"approve" | "deny"} answer
 * @param {string} note the note (approve) or the reason (deny); empty for none
 * @returns {Promise<ApprovalAnswerView>}
 */
export const answerApproval = (id, answer, note) =>
  post(`/api/approvals/${enc(id)}/${answer}`, note ? { [answer === "approve" ? "note" : "reason"]: note } : {});

/**
 * The one place the page trusts the wire: each function above names what its endpoint answers.
 * @param {string} path
 */
const get = (path) => request(path, { method: "GET" });

/**
 * @param {string} path
 * @param {unknown} [body] sent as JSON
 */
const post = (path, body) =>
  request(path, {
    method: "POST",
    headers: { [CSRF_HEADER]: csrf, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });

/** Path segments and query values come from job names and run ids, which a file name chose. */
const enc = encodeURIComponent;

/**
 * @param {string} path
 * @param {RequestInit} init
 * @returns {Promise<any>}
 */
async function request(path, init) {
  let response;
  try {
    response = await fetch(path, { ...init, credentials: "same-origin", cache: "no-store" });
  } catch {
    throw new ApiError(0, "the daemon does not answer: is countd still running?");
  }
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) for (const listener of signedOutListeners) listener();
  // A refused "run now" answers 409 with {status: "skipped", message}: the message is the reason.
  if (!response.ok) throw new ApiError(response.status, body.error ?? body.message ?? `HTTP ${response.status}`, body);
  return body;
}
