import { createHash, createHmac } from "node:crypto";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { consoleFolder, daemonsOf, openLive, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { closeServer, listenLoopback } from "../support/loopback.js";

/*
 * The console's sign-in cookie against a real daemon: a session id made at sign-in and kept in the
 * daemon's memory, never the token, so a browser that sends it to another port of 127.0.0.1 hands
 * that service nothing it could use elsewhere, and nothing that outlives the daemon.
 */

const cookieOf = (setCookie: string) => setCookie.split(";", 1)[0]!;
const attributesOf = (setCookie: string) =>
  setCookie
    .split(";")
    .slice(1)
    .map((part) => part.trim().toLowerCase());

describe("the console's sign-in session", () => {
  const daemons = daemonsOf();
  afterEach(() => daemons.cleanup());

  async function start(dir?: string, console = '  listen: "127.0.0.1:0"\n'): Promise<ConsoleDaemon> {
    const folder = dir ?? (await consoleFolder({ console }));
    if (!dir) await writeJob(folder, "hello", "prompt: say hello\n");
    const started = await startConsoleDaemon(folder, { OPENAI_API_KEY: "sk-console-session-test-key" });
    daemons.started.push(started);
    return started;
  }

  async function signIn(console: ConsoleDaemon, headers: Record<string, string> = {}): Promise<string> {
    const answer = await fetch(`${console.origin}/?token=${encodeURIComponent(console.token)}`, { redirect: "manual", headers });
    expect(answer.status).toBe(303);
    return answer.headers.get("set-cookie")!;
  }

  const status = (console: ConsoleDaemon, cookie: string) => fetch(`${console.origin}/api/status`, { headers: { cookie } });

  it("signs in with a random 256-bit session id in a cookie named for the console's port, not the token nor anything made from it", async () => {
    const console = await start();
    const setCookie = await signIn(console);
    const [name, value] = cookieOf(setCookie).split("=") as [string, string];
    // Plain http on loopback cannot carry a __Host- cookie (it needs Secure): the name tells this console's port apart.
    expect(name).toBe(`countd_console_${console.port}`);
    expect(attributesOf(setCookie)).toEqual(expect.arrayContaining(["httponly", "samesite=strict", "path=/"]));
    expect(Buffer.from(decodeURIComponent(value), "base64url")).toHaveLength(32);

    const token = console.token;
    const madeFromToken = [
      token,
      Buffer.from(token).toString("base64url"),
      Buffer.from(token).toString("hex"),
      createHash("sha256").update(token).digest("base64url"),
      createHash("sha256").update(token).digest("hex"),
      createHmac("sha256", token).update("countd console csrf").digest("base64url"),
    ];
    for (const made of madeFromToken) {
      expect(decodeURIComponent(value)).not.toBe(made);
      expect(setCookie).not.toContain(made);
    }
    // Random at each sign-in: a second browser gets another session, and both work.
    const second = await signIn(console);
    expect(cookieOf(second)).not.toBe(cookieOf(setCookie));
    expect((await status(console, cookieOf(setCookie))).status).toBe(200);
    expect((await status(console, cookieOf(second))).status).toBe(200);

    // The CSRF proof is the session's, not the token's: each session has its own.
    const csrfOf = async (cookie: string) =>
      ((await (await fetch(`${console.origin}/api/session`, { headers: { cookie } })).json()) as { csrf: string }).csrf;
    const csrf = await csrfOf(cookieOf(setCookie));
    expect(madeFromToken).not.toContain(csrf);
    expect(await csrfOf(cookieOf(second))).not.toBe(csrf);
  });

  it("refuses the token sent as a cookie, under the old name or the new, on the API and the WebSocket", async () => {
    const console = await start();
    for (const cookie of [
      `countd_console=${console.token}`,
      `countd_console_${console.port}=${console.token}`,
      `__Host-countd_console=${console.token}`,
    ]) {
      expect((await status(console, cookie)).status, cookie).toBe(401);
      const opened = await openLive(`ws://${console.host}/api/ws`, { headers: { cookie }, origin: console.origin });
      expect(opened.ok ? "opened" : opened.status, cookie).toBe(401);
    }
    // A browser that kept the token's cookie from before is told to drop it when it signs in.
    const answer = await fetch(`${console.origin}/?token=${encodeURIComponent(console.token)}`, {
      redirect: "manual",
      headers: { cookie: `countd_console=${console.token}` },
    });
    const set = answer.headers.getSetCookie();
    expect(set).toHaveLength(2);
    expect(set[0]).toMatch(new RegExp(`^countd_console_${console.port}=[^;]+;`));
    expect(set[1]).toMatch(/^countd_console=; /);
    expect(attributesOf(set[1]!)).toContain("max-age=0");
  });

  it("a session grants nothing after the daemon restarts; the token signs in again", async () => {
    // The same port before and after, so the browser would send the same cookie.
    const probe = createServer();
    const port = await listenLoopback(probe);
    await closeServer(probe);
    const first = await start(undefined, `  listen: "127.0.0.1:${port}"\n`);
    const cookie = cookieOf(await signIn(first));
    expect((await status(first, cookie)).status).toBe(200);
    await first.stop();

    const second = await start(first.dir);
    expect(second.port).toBe(port);
    expect(second.token).toBe(first.token);
    const refused = await status(second, cookie);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: string }).error).toContain("countd console");
    const opened = await openLive(`ws://${second.host}/api/ws`, { headers: { cookie }, origin: second.origin });
    expect(opened.ok ? "opened" : opened.status).toBe(401);
    expect((await status(second, cookieOf(await signIn(second)))).status).toBe(200);
  });

  it("signing out ends the session at once, on the API and the WebSocket, and clears the cookie", async () => {
    const console = await start();
    const cookie = cookieOf(await signIn(console));
    const other = cookieOf(await signIn(console));
    const { csrf } = (await (await fetch(`${console.origin}/api/session`, { headers: { cookie } })).json()) as { csrf: string };

    const out = await fetch(`${console.origin}/api/sign-out`, {
      method: "POST",
      headers: { cookie, origin: console.origin, "x-countd-csrf": csrf },
    });
    expect(out.status).toBe(200);
    expect(await out.json()).toEqual({ signed_out: true });
    const cleared = out.headers.get("set-cookie")!;
    expect(cleared).toMatch(new RegExp(`^countd_console_${console.port}=;`));
    expect(attributesOf(cleared)).toContain("max-age=0");

    expect((await status(console, cookie)).status).toBe(401);
    const opened = await openLive(`ws://${console.host}/api/ws`, { headers: { cookie }, origin: console.origin });
    expect(opened.ok ? "opened" : opened.status).toBe(401);
    // Another browser's session is its own.
    expect((await status(console, other)).status).toBe(200);
  });

  it("behind a TLS reverse proxy (allow_remote, X-Forwarded-Proto: https) the cookie is __Host- and Secure", async () => {
    const console = await start(undefined, '  listen: "127.0.0.1:0"\n  allow_remote: true\n');
    const setCookie = await signIn(console, { "x-forwarded-proto": "https" });
    expect(setCookie).toMatch(/^__Host-countd_console=[^;]+;/);
    expect(attributesOf(setCookie)).toEqual(expect.arrayContaining(["secure", "httponly", "samesite=strict", "path=/"]));
    expect(attributesOf(setCookie).some((part) => part.startsWith("domain"))).toBe(false);
    expect((await status(console, cookieOf(setCookie))).status).toBe(200);
  });
});
