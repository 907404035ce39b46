import { createHash, createHmac, randomBytes } from "node:crypto";

/**
 * Browsers signed in to the console. Each sign-in with the token makes a random 256-bit session
 * id, and the browser's cookie holds that id, never the token: browsers send a cookie for
 * 127.0.0.1 to every port of it, so another local service the owner visits receives the cookie,
 * which is worth nothing beyond this console and this daemon's life. The sessions live in the
 * daemon's memory only: a restart ends them all, and the user signs in again with the address
 * `countd console` prints. The token is read once at start, so a new token (console.token
 * removed) takes a restart, which ends every session made with the old one.
 */
export class Sessions {
  /** Keyed by the id's SHA-256, so looking a session up compares no secret a byte at a time. */
  private readonly live = new Map<string, { csrf: string }>();
  /** The CSRF proofs are keyed by this, not by the token: knowing the token tells nothing of them. */
  private readonly csrfKey = randomBytes(32);

  /** A new session: its id for the cookie. The oldest is ended past SESSIONS_KEPT. */
  create(): string {
    const id = randomBytes(32).toString("base64url");
    this.live.set(digest(id), { csrf: createHmac("sha256", this.csrfKey).update(id).digest("base64url") });
    if (this.live.size > SESSIONS_KEPT) this.live.delete(this.live.keys().next().value!);
    return id;
  }

  /** The CSRF proof of a live session, which the page reads from /api/session; undefined for an id that is none. */
  csrf(id: string): string | undefined {
    return this.live.get(digest(id))?.csrf;
  }

  end(id: string): boolean {
    return this.live.delete(digest(id));
  }
}

/** Browsers signed in at once; a person has a few, and a script signing in without end must not grow the daemon. */
export const SESSIONS_KEPT = 64;

/** How an answer names the session that gave it: a prefix of its id's SHA-256, which tells nothing of the id. */
export const sessionName = (id: string): string => `console session ${digest(id).slice(0, 8)}`;

const digest = (id: string) => createHash("sha256").update(id).digest("base64url");
