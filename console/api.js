/**
 * The daemon's JSON API. The sign-in cookie is HttpOnly, so the page never holds the token; what it
 * holds is the CSRF proof from /api/session, which every change must carry.
 */

const CSRF_HEADER = "x-countd-csrf";

let csrf = "";
const signedOutListeners = new Set();

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** Called once the daemon answers 401: the cookie is gone or the token changed. */
export function onSignedOut(listener) {
  signedOutListeners.add(listener);
}

export async function startSession() {
  const session = await get("/api/session");
  csrf = session.csrf;
  return session;
}

export const get = (path) => request(path, { method: "GET" });

export const post = (path) => request(path, { method: "POST", headers: { [CSRF_HEADER]: csrf } });

/** Path segments and query values come from job names and run ids, which a file name chose. */
export const enc = encodeURIComponent;

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
