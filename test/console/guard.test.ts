import { describe, expect, it } from "vitest";
import { CSRF_HEADER, Guard, plainCookie, readCookie } from "../../src/console/guard.js";

const TOKEN = "k3Jx1tHcY0wq4w9jL2m7pQeRr8sT6uVv_zA5bC-dE0f";
const PORT = 7420;

function guard(opts: { trusted?: boolean; allowRemote?: boolean; now?: () => number } = {}): Guard {
  return new Guard({
    token: TOKEN,
    trusted: opts.trusted ?? false,
    allowRemote: opts.allowRemote ?? false,
    port: () => PORT,
    ...(opts.now ? { now: opts.now } : {}),
  });
}

const headers = (init: Record<string, string>) => new Headers(init);
const COOKIE = plainCookie(PORT);
/** Signs in as the sign-in address does: the new session's id, which the cookie holds. */
const sessionOf = (g: Guard) => readCookie(g.signIn(headers({})).split(";", 1)[0], COOKIE)!;

describe("Guard.hostAllowed: only this machine's names, on the console's port (DNS rebinding)", () => {
  it.each([`127.0.0.1:${PORT}`, `localhost:${PORT}`, `LOCALHOST:${PORT}`, `[::1]:${PORT}`, `127.0.1.1:${PORT}`])(
    "answers Host %s",
    (host) => {
      expect(guard().hostAllowed(host)).toBe(true);
    },
  );

  it.each([
    // A page on evil.example whose name was made to resolve to 127.0.0.1 sends its own name.
    [`evil.example:${PORT}`, "a foreign name"],
    [`127.0.0.1.evil.example:${PORT}`, "a name that starts like a loopback address"],
    [`localhost.evil.example:${PORT}`, "a name that starts like localhost"],
    [`evil.example`, "a foreign name without port"],
    [`127.0.0.1:${PORT + 1}`, "the wrong port"],
    [`localhost:80`, "port 80 written out"],
    ["127.0.0.1", "no port (80)"],
    ["[::1]", "IPv6 loopback without port"],
    [`[::2]:${PORT}`, "another IPv6 address"],
    [`[fe80::1]:${PORT}`, "a link-local IPv6 address"],
    [`0.0.0.0:${PORT}`, "the any address"],
    [`192.168.1.10:${PORT}`, "a LAN address"],
    [`127.0.0.1:${PORT}:1`, "a malformed host"],
    [`user@127.0.0.1:${PORT}`, "credentials in the host"],
    ["", "an empty Host"],
  ])("refuses Host %s (%s)", (host) => {
    expect(guard().hostAllowed(host)).toBe(false);
  });

  it("refuses a request without Host", () => {
    expect(guard().hostAllowed(undefined)).toBe(false);
  });

  it("leaves the Host to the reverse proxy with allow_remote, and to the socket's file mode on the control socket", () => {
    expect(guard({ allowRemote: true }).hostAllowed("console.example.org")).toBe(true);
    expect(guard({ trusted: true }).hostAllowed(undefined)).toBe(true);
  });

  it("checks against the port actually listened on, read at each request (port 0 picks one after start)", () => {
    let port = 0;
    const g = new Guard({ token: TOKEN, trusted: false, allowRemote: false, port: () => port });
    expect(g.hostAllowed("127.0.0.1:43123")).toBe(false);
    port = 43123;
    expect(g.hostAllowed("127.0.0.1:43123")).toBe(true);
  });
});

describe("Guard.credential", () => {
  it("takes the token as a bearer token or a signed-in session's cookie, from Node's headers or fetch's", () => {
    const g = guard();
    const id = sessionOf(g);
    expect(g.credential(headers({ authorization: `Bearer ${TOKEN}` }))).toBe("bearer");
    expect(g.credential({ authorization: `bearer   ${TOKEN}` })).toBe("bearer");
    expect(g.credential(headers({ cookie: `theme=dark; ${COOKIE}=${encodeURIComponent(id)}; other=1` }))).toBe("cookie");
    expect(g.credential({ cookie: `${COOKIE}=${id}` })).toBe("cookie");
  });

  it("refuses a wrong, partial, empty or misplaced token", () => {
    const g = guard();
    const refused: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { authorization: "Bearer " },
      { authorization: TOKEN },
      { authorization: `Basic ${Buffer.from(`countd:${TOKEN}`).toString("base64")}` },
      { cookie: `${COOKIE}=wrong` },
      { cookie: `${COOKIE}=` },
      { cookie: `${COOKIE}=${TOKEN}` },
      { cookie: `countd_console=${TOKEN}` },
      { cookie: `x${COOKIE}=${sessionOf(g)}` },
      { cookie: `other=${sessionOf(g)}` },
      { cookie: `${plainCookie(PORT + 1)}=${sessionOf(g)}` },
      { cookie: `${COOKIE}=${sessionOf(guard())}` },
      { "x-countd-token": TOKEN },
    ];
    for (const init of refused) {
      expect(g.credential(headers(init)), JSON.stringify(init)).toBeUndefined();
    }
  });

  it("a wrong bearer token does not hide a right cookie, nor the reverse", () => {
    const g = guard();
    expect(g.credential(headers({ authorization: "Bearer wrong", cookie: `${COOKIE}=${sessionOf(g)}` }))).toBe("cookie");
    expect(g.credential(headers({ authorization: `Bearer ${TOKEN}`, cookie: `${COOKIE}=wrong` }))).toBe("bearer");
  });

  it("a cookie that is not valid percent-encoding is no credential, not an exception", () => {
    const g = guard();
    expect(() => g.credential({ cookie: `${COOKIE}=%E0%A4%A` })).not.toThrow();
    expect(g.credential({ cookie: `${COOKIE}=%` })).toBeUndefined();
    expect(readCookie(`a=%zz; ${COOKIE}=${TOKEN}`, COOKIE)).toBe(TOKEN);
  });

  it("on the control socket every request is the owner's", () => {
    expect(guard({ trusted: true }).credential(headers({}))).toBe("socket");
  });

  it("validToken compares the sign-in URL's token", () => {
    expect(guard().validToken(TOKEN)).toBe(true);
    expect(guard().validToken(TOKEN.toUpperCase())).toBe(false);
    expect(guard().validToken("")).toBe(false);
  });
});

describe("Guard.changeAllowed (CSRF) and originAllowed", () => {
  const host = `127.0.0.1:${PORT}`;
  const g = guard();
  const cookie = `${COOKIE}=${sessionOf(g)}`;
  const csrf = g.csrf(headers({ cookie }));

  it("the CSRF value is the session's: not the token, another for each session, none without one", () => {
    expect(csrf).not.toBe("");
    expect(csrf).not.toContain(TOKEN);
    expect(g.csrf(headers({ cookie: `${COOKIE}=${sessionOf(g)}` }))).not.toBe(csrf);
    expect(g.csrf(headers({ authorization: `Bearer ${TOKEN}` }))).toBe("");
  });

  it("lets a change with the cookie through only with its session's CSRF header and the console's own Origin", () => {
    expect(g.changeAllowed("cookie", headers({ cookie, [CSRF_HEADER]: csrf, origin: `http://${host}` }), host)).toBe(true);
    // Same-origin fetch from older browsers may leave Origin out; the CSRF header alone proves the page read /api/session.
    expect(g.changeAllowed("cookie", headers({ cookie, [CSRF_HEADER]: csrf }), host)).toBe(true);
    // Another session's proof is not this one's.
    const other = `${COOKIE}=${sessionOf(g)}`;
    expect(g.changeAllowed("cookie", headers({ cookie: other, [CSRF_HEADER]: csrf, origin: `http://${host}` }), host)).toBe(false);
  });

  it.each([
    ["no CSRF header (a form posted from another site)", { origin: "https://evil.example" }],
    ["no CSRF header and our own Origin", { origin: `http://${host}` }],
    ["a wrong CSRF header", { [CSRF_HEADER]: "guess", origin: `http://${host}` }],
    ["the token itself as CSRF header", { [CSRF_HEADER]: TOKEN, origin: `http://${host}` }],
    ["the right CSRF header from a foreign Origin", { [CSRF_HEADER]: csrf, origin: "http://evil.example" }],
    ["the right CSRF header from our host over https without allow_remote", { [CSRF_HEADER]: csrf, origin: `https://${host}` }],
    ["the right CSRF header from another port", { [CSRF_HEADER]: csrf, origin: `http://127.0.0.1:${PORT + 1}` }],
    ["the right CSRF header from an opaque origin", { [CSRF_HEADER]: csrf, origin: "null" }],
  ])("refuses a cookie change with %s", (_why, init) => {
    expect(g.changeAllowed("cookie", headers({ cookie, ...(init as Record<string, string>) }), host)).toBe(false);
  });

  it("a bearer token or the socket needs no CSRF proof: no browser sends them on its own", () => {
    const g = guard();
    expect(g.changeAllowed("bearer", headers({}), host)).toBe(true);
    expect(g.changeAllowed("socket", headers({ origin: "http://evil.example" }), undefined)).toBe(true);
  });

  it("originAllowed: required Origin must be present and the console's; https only behind allow_remote", () => {
    const g = guard();
    expect(g.originAllowed(undefined, host, true)).toBe(false);
    expect(g.originAllowed(undefined, host, false)).toBe(true);
    expect(g.originAllowed(`http://${host}`, host, true)).toBe(true);
    expect(g.originAllowed(`http://${host}`, undefined, true)).toBe(false);
    expect(g.originAllowed("http://evil.example", host, false)).toBe(false);
    expect(g.originAllowed(`http://${host}.evil.example`, host, false)).toBe(false);
    expect(g.originAllowed(`https://${host}`, host, true)).toBe(false);
    expect(guard({ allowRemote: true }).originAllowed("https://console.example.org", "console.example.org", true)).toBe(true);
  });
});

describe("Guard.failed: repeated failures are slowed down", () => {
  it("answers the first five failures at once, then waits 250 ms doubling to at most 8 s", () => {
    const g = guard();
    const waits = Array.from({ length: 14 }, () => g.failed("10.0.0.1"));
    expect(waits).toEqual([0, 0, 0, 0, 0, 250, 500, 1000, 2000, 4000, 8000, 8000, 8000, 8000]);
  });

  it("counts each address on its own, and a success clears the address's count", () => {
    const g = guard();
    for (let i = 0; i < 6; i++) g.failed("10.0.0.1");
    expect(g.failed("10.0.0.2")).toBe(0);
    expect(g.failed("10.0.0.1")).toBe(500);
    g.succeeded("10.0.0.1");
    expect(g.failed("10.0.0.1")).toBe(0);
  });

  it("forgets failures older than ten minutes", () => {
    let now = 1_000_000;
    const g = guard({ now: () => now });
    for (let i = 0; i < 8; i++) g.failed("10.0.0.1");
    now += 9 * 60_000;
    expect(g.failed("10.0.0.1")).toBe(2000);
    now += 11 * 60_000;
    expect(g.failed("10.0.0.1")).toBe(0);
  });

  it("remembers a bounded number of addresses: a flood from many does not grow the daemon's memory", () => {
    const g = guard();
    for (let i = 0; i < 6; i++) g.failed("10.9.9.9");
    for (let i = 0; i < 10_001; i++) g.failed(`addr-${i}`);
    // The oldest address was dropped to make room: it starts again from nothing.
    expect(g.failed("10.9.9.9")).toBe(0);
    expect(g.failed("addr-10000")).toBe(0);
  });
});
