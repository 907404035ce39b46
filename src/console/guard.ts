import type { IncomingHttpHeaders } from "node:http";
import { csrfToken, sameSecret } from "./token.js";

/** The browser's sign-in cookie: HttpOnly, so the page's scripts (and anything injected into them) never read it. */
export const COOKIE = "countd_console";
/** The header the page sends with every change, holding csrfToken(token). */
export const CSRF_HEADER = "x-countd-csrf";

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
  readonly csrf: string;
  private readonly now: () => number;

  constructor(private readonly opts: GuardOptions) {
    this.csrf = csrfToken(opts.token);
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
  credential(headers: IncomingHttpHeaders | Headers): Credential | undefined {
    if (this.opts.trusted) return "socket";
    const get = (name: string) => (headers instanceof Headers ? (headers.get(name) ?? undefined) : (headers[name] as string | undefined));
    const bearer = /^Bearer\s+(\S+)$/i.exec(get("authorization") ?? "")?.[1];
    if (bearer !== undefined && sameSecret(bearer, this.opts.token)) return "bearer";
    const cookie = readCookie(get("cookie"), COOKIE);
    if (cookie !== undefined && sameSecret(cookie, this.opts.token)) return "cookie";
    return undefined;
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
    if (sent === null || !sameSecret(sent, this.csrf)) return false;
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
