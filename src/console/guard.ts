import type { IncomingHttpHeaders } from "node:http";
import { sessionName, Sessions } from "./sessions.js";
import { sameSecret } from "./token.js";

/**
 * The browser's sign-in cookie, holding a session id (sessions.ts): HttpOnly, so the page's scripts
 * (and anything injected into them) never read it. Behind a TLS reverse proxy it is `__Host-`,
 * which the browser keeps to this exact origin. That prefix needs Secure, which a browser refuses
 * on plain http, so on loopback the name carries the console's port instead: cookies ignore ports,
 * and two consoles on one machine must not overwrite each other's.
 */
export const SECURE_COOKIE = "__Host-countd_console";
export const plainCookie = (port: number) => `countd_console_${port}`;
/** The header the page sends with every change, holding its session's CSRF proof. */
export const CSRF_HEADER = "x-countd-csrf";

type AnyHeaders = IncomingHttpHeaders | Headers;

/** Failed sign-ins from one address past which each answer waits, doubling up to MAX_DELAY_MS. */
const FREE_FAILURES = 5;
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 8_000;
const FAILURE_WINDOW_MS = 10 * 60_000;
/** Addresses remembered: a flood from many addresses must not grow the daemon's memory without end. */
const ADDRESSES_KEPT = 10_000;

export type Credential = "bearer" | "cookie" | "socket";

export interface GuardOptions {
  token: string;
  /** Requests on the Unix control socket: its file mode already limits who can connect. */
  trusted: boolean;
  /** console.allow_remote: the Host header is then the reverse proxy's business. */
  allowRemote: boolean;
  /** The port actually listened on (port 0 picks one). */
  port: () => number;
  now?: () => number;
}

/** Who may reach the daemon through its console, decided in one place for HTTP and WebSocket alike. */
export class Guard {
  private readonly failures = new Map<string, { count: number; since: number }>();
  private readonly sessions = new Sessions();
  private readonly now: () => number;

  constructor(private readonly opts: GuardOptions) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * A page on another site that resolves its own name to 127.0.0.1 (DNS rebinding) sends its own
   * name as Host: only the names of this machine, with the console's port, are answered.
   */
  hostAllowed(host: string | undefined): boolean {
    if (this.opts.trusted || this.opts.allowRemote) return true;
    if (!host) return false;
    const port = String(this.opts.port());
    const match = /^(\[[0-9a-fA-F:.]+\]|[^:]+)(?::(\d+))?$/.exec(host);
    if (!match || (match[2] ?? "80") !== port) return false;
    const name = match[1]!.toLowerCase();
    return name === "localhost" || name === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
  }

  /** How the request proves it may act for the daemon's owner, if it does. */
  credential(headers: AnyHeaders): Credential | undefined {
    if (this.opts.trusted) return "socket";
    const bearer = /^Bearer\s+(\S+)$/i.exec(header(headers, "authorization") ?? "")?.[1];
    if (bearer !== undefined && sameSecret(bearer, this.opts.token)) return "bearer";
    if (this.session(headers) !== undefined) return "cookie";
    return undefined;
  }

  /** After a valid token: a new session, and the Set-Cookie that hands its id to the browser. */
  signIn(headers: AnyHeaders): string {
    const secure = this.secure(headers);
    return `${secure ? SECURE_COOKIE : plainCookie(this.opts.port())}=${this.sessions.create()}; ${attributes(secure)}`;
  }

  /** Ends the request's session, if it has one, and answers the Set-Cookie that clears it. */
  signOut(headers: AnyHeaders): { ended: boolean; setCookie: string } {
    const found = this.session(headers);
    const secure = found?.name === SECURE_COOKIE;
    return {
      ended: found !== undefined && this.sessions.end(found.id),
      setCookie: `${found?.name ?? plainCookie(this.opts.port())}=; ${attributes(secure)}; Max-Age=0`,
    };
  }

  /** The CSRF proof of the request's session: what /api/session tells the page. Empty for a bearer token or the socket, which need none. */
  csrf(headers: AnyHeaders): string {
    const found = this.session(headers);
    return found ? this.sessions.csrf(found.id)! : "";
  }

  /** Which browser session sent the request, as an approval's answer records it. */
  sessionName(headers: AnyHeaders): string {
    const found = this.session(headers);
    return found ? sessionName(found.id) : "no console session";
  }

  /** The token given in the sign-in URL, checked. */
  validToken(given: string): boolean {
    return sameSecret(given, this.opts.token);
  }

  /**
   * A change sent with the cookie must come from the console's own page: a form or fetch from
   * another site carries the cookie only if SameSite failed, and never the CSRF header (a custom
   * header from another origin needs a CORS preflight, which the console never grants) or a
   * matching Origin. A bearer token or the socket is never sent by a browser on its own.
   */
  changeAllowed(credential: Credential, headers: Headers, host: string | undefined): boolean {
    if (credential !== "cookie") return true;
    const sent = headers.get(CSRF_HEADER);
    const expected = this.csrf(headers);
    if (sent === null || expected === "" || !sameSecret(sent, expected)) return false;
    return this.originAllowed(headers.get("origin") ?? undefined, host, false);
  }

  /** A browser always sends Origin on a WebSocket upgrade and on a POST: it must be the console's own. */
  originAllowed(origin: string | undefined, host: string | undefined, required: boolean): boolean {
    if (origin === undefined) return !required;
    if (!host) return false;
    return origin === `http://${host}` || (this.opts.allowRemote && origin === `https://${host}`);
  }

  /**
   * Records a failed attempt from `address` and returns how long its answer should wait: guessing
   * the 256-bit token is hopeless anyway, but a script hammering the console should not cost the
   * daemon, or fill its log, at full speed.
   */
  failed(address: string): number {
    const now = this.now();
    let entry = this.failures.get(address);
    if (!entry || now - entry.since > FAILURE_WINDOW_MS) entry = { count: 0, since: now };
    entry.count++;
    this.failures.delete(address);
    this.failures.set(address, entry);
    if (this.failures.size > ADDRESSES_KEPT) this.failures.delete(this.failures.keys().next().value!);
    return entry.count <= FREE_FAILURES ? 0 : Math.min(FIRST_DELAY_MS * 2 ** (entry.count - FREE_FAILURES - 1), MAX_DELAY_MS);
  }

  succeeded(address: string): void {
    this.failures.delete(address);
  }

  /** The live session a cookie names, under either name: which one the browser keeps depends on the scheme it signed in by. */
  private session(headers: AnyHeaders): { name: string; id: string } | undefined {
    const cookies = header(headers, "cookie");
    for (const name of [SECURE_COOKIE, plainCookie(this.opts.port())]) {
      const id = readCookie(cookies, name);
      if (id !== undefined && this.sessions.csrf(id) !== undefined) return { name, id };
    }
    return undefined;
  }

  /**
   * The daemon serves plain http; a browser reaches it by https only through a reverse proxy, which
   * console.allow_remote expects and which says so in X-Forwarded-Proto. A forged header only costs
   * the sender its own sign-in: a browser on plain http drops a Secure cookie.
   */
  private secure(headers: AnyHeaders): boolean {
    return this.opts.allowRemote && header(headers, "x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https";
  }
}

const attributes = (secure: boolean) => `Path=/; HttpOnly; SameSite=Strict${secure ? "; Secure" : ""}`;

function header(headers: AnyHeaders, name: string): string | undefined {
  return headers instanceof Headers ? (headers.get(name) ?? undefined) : (headers[name] as string | undefined);
}

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return decoded(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** A value that is not valid percent-encoding is no token: refused like a wrong one, not thrown (a throw in the WebSocket upgrade would stop the daemon). */
function decoded(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}
