import type { Context } from "hono";
import type { HttpBindings } from "@hono/node-server";
import type { Asset } from "./assets.js";
import { readCookie, type Credential, type Guard } from "./guard.js";
import type { SignOutAnswer } from "./protocol.js";

/** The console app's context: Node's request, and the credential the request came with. */
export type ConsoleEnv = { Bindings: HttpBindings; Variables: { credential: Credential } };

/** Before sessions, the cookie held the token itself under this name: a browser that still sends it is told to drop it. */
const TOKEN_COOKIE = "countd_console";

/**
 * The sign-in address `countd console` prints (`/?token=…`): a valid token starts a session and
 * leaves the address bar (and the history) at once; the cookie holds the session's id, not the
 * token. A wrong one gets the page, which tells a person how to sign in, after the slowdown a
 * script gets.
 */
export async function signIn(c: Context<ConsoleEnv>, guard: Guard, asset: Asset): Promise<Response> {
  const given = c.req.query("token");
  if (given === undefined) return page(c, asset);
  if (!guard.validToken(given)) {
    await slowDown(c, guard);
    return page(c, asset, 401);
  }
  guard.succeeded(address(c));
  c.header("Set-Cookie", guard.signIn(c.req.raw.headers));
  if (readCookie(c.req.header("cookie"), TOKEN_COOKIE) !== undefined)
    c.header("Set-Cookie", `${TOKEN_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`, { append: true });
  return c.redirect("/", 303);
}

/** Ends the browser's session now, not when the daemon stops; other browsers' sessions stay. */
export function signOut(c: Context<ConsoleEnv>, guard: Guard): Response {
  const { ended, setCookie } = guard.signOut(c.req.raw.headers);
  c.header("Set-Cookie", setCookie);
  return c.json({ signed_out: ended } satisfies SignOutAnswer);
}

export function page(c: Context, asset: Asset, status: 200 | 401 = 200): Response {
  c.header("Content-Type", asset.type);
  c.header(
    "Content-Security-Policy",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  );
  return c.body(new Uint8Array(asset.body), status);
}

/** A refused credential: 401 after the slowdown the guard asks for. */
export async function refuse(c: Context<ConsoleEnv>, guard: Guard, message: string): Promise<Response> {
  await slowDown(c, guard);
  return c.json({ error: message }, 401);
}

/** Counts a failed credential and waits as long as the guard asks. */
async function slowDown(c: Context<ConsoleEnv>, guard: Guard): Promise<void> {
  const wait = guard.failed(address(c));
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

function address(c: Context<ConsoleEnv>): string {
  return c.env.incoming.socket.remoteAddress ?? "local";
}
