import { connect, createServer, type Server } from "node:net";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadAssets } from "../../src/console/assets.js";
import type { JobView, RunView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { loadConfig } from "../../src/config/load.js";
import { ConfigError } from "../../src/config/errors.js";
import { startDaemon } from "../../src/daemon.js";
import { useAimock } from "../support/aimock.js";
import {
  consoleFolder,
  daemonsOf,
  endedRun,
  gate,
  openLive,
  raw,
  SLOW,
  startConsoleDaemon,
  writeJob,
  type ConsoleDaemon,
} from "../support/console-daemon.js";
import { logLines, spawnDaemon } from "../support/daemon-process.js";
import { captureLog } from "../support/log-capture.js";
import { listenLoopback } from "../support/loopback.js";

/*
 * The security cases of the console against a real daemon: what a page on another site, a
 * script without the token, another local user or a DNS-rebinding attacker can and cannot do.
 */

const API_KEY = "sk-proj-console-security-0123456789abcdef";
const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SMTP_PASSWORD = "smtp-password-7f3a9c1e5b";
const EXTRA_TOKEN = "xoxb-extra-token-4242424242";

/** Every endpoint of the API, as method and path: each needs the token. */
const ENDPOINTS: Array<[string, string]> = [
  ["GET", "/api/session"],
  ["GET", "/api/status"],
  ["GET", "/api/config"],
  ["GET", "/api/jobs"],
  ["GET", "/api/jobs/hello"],
  ["POST", "/api/jobs/hello/run"],
  ["POST", "/api/jobs/hello/pause"],
  ["POST", "/api/jobs/hello/resume"],
  ["POST", "/api/pause"],
  ["POST", "/api/resume"],
  ["GET", "/api/runs"],
  ["GET", "/api/runs/20261202T090000Z-abcd"],
  ["POST", "/api/runs/20261202T090000Z-abcd/cancel"],
  ["GET", "/api/stats"],
  ["GET", "/api/outbox"],
  ["POST", "/api/outbox/hello.20261202T090000Z-abcd.webhook-x/retry"],
  ["GET", "/api/no-such-endpoint"],
];

const cookieOf = (setCookie: string) => setCookie.split(";", 1)[0]!;

describe("the console's security", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  const gates: Array<() => void> = [];
  const servers: Server[] = [];
  let env: Record<string, string>;

  beforeEach(() => {
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: API_KEY, HOOK_SECRET, SMTP_PASSWORD, EXTRA_TOKEN };
    mock.onMessage("say hello", { content: "hello" });
  });
  afterEach(async () => {
    gates.splice(0).forEach((open) => open());
    await daemons.cleanup();
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });

  async function start(opts: Parameters<typeof consoleFolder>[0] = {}): Promise<ConsoleDaemon> {
    const dir = await consoleFolder(opts);
    await writeJob(dir, "hello", "prompt: say hello\n");
    const started = await startConsoleDaemon(dir, env);
    daemons.started.push(started);
    return started;
  }

  /** Signs in as the browser does with the URL `countd console` prints: the cookie it is given. */
  async function signIn(console: ConsoleDaemon): Promise<string> {
    const answer = await fetch(`${console.origin}/?token=${encodeURIComponent(console.token)}`, { redirect: "manual" });
    expect(answer.status).toBe(303);
    return cookieOf(answer.headers.get("set-cookie")!);
  }

  async function runs(console: ConsoleDaemon): Promise<RunRecord[]> {
    return (await console.get<{ runs: RunRecord[] }>("/api/runs")).runs;
  }

  it("answers 401 on every /api endpoint without a token, or with a wrong one, and nothing changes", async () => {
    const console = await start();
    let sender = 0;
    for (const [method, path] of ENDPOINTS) {
      for (const headers of [
        {},
        { authorization: "Bearer not-the-token" },
        { cookie: `countd_console_${console.port}=not-the-token` },
        { cookie: `countd_console_${console.port}=%` },
      ] as Array<Record<string, string>>) {
        // Each from its own loopback address, so that the slowdown of repeated failures (tested below) does not set in.
        const localAddress = `127.0.${Math.floor(++sender / 4) + 10}.${(sender % 4) + 1}`;
        const answer = await raw({ port: console.port, method, path, headers: { host: console.host, ...headers }, localAddress });
        expect(answer.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(answer.headers["content-type"]).toMatch(/^application\/json/);
        expect(answer.json.error).toContain("sign in first");
      }
    }
    expect(await runs(console)).toEqual([]);
    expect((await console.get<JobView>("/api/jobs/hello")).paused).toBe(false);
    expect((await console.get("/api/status")).jobs.paused_all).toBe(false);
  });

  it("serves the page and its static files without a token, with headers that keep it from being framed or sniffed", async () => {
    const console = await start();
    const assets = await loadAssets();
    expect(assets.has("/")).toBe(true);
    for (const [path, asset] of assets) {
      const answer = await fetch(`${console.origin}${path}`);
      expect(answer.status, path).toBe(200);
      expect(answer.headers.get("content-type")).toBe(asset.type);
      expect(Buffer.from(await answer.arrayBuffer()).equals(asset.body)).toBe(true);
      expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
      expect(answer.headers.get("x-frame-options")).toBe("DENY");
      expect(answer.headers.get("referrer-policy")).toBe("no-referrer");
      expect(answer.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(answer.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    }
    // The API's answers are not kept by the browser's cache.
    expect((await console.api("/api/status")).headers.get("cache-control")).toBe("no-store");
  });

  it("takes the token as a bearer token; the ?token= address signs in with an HttpOnly SameSite=Strict cookie and leaves the address bar", async () => {
    const console = await start();
    expect((await console.api("/api/status")).status).toBe(200);

    const signIn = await fetch(`${console.origin}/?token=${encodeURIComponent(console.token)}`, { redirect: "manual" });
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get("location")).toBe("/");
    const setCookie = signIn.headers.get("set-cookie")!;
    // A session id named for the console's port, not the token (session.test.ts has the rest).
    expect(setCookie).toMatch(new RegExp(`^countd_console_${console.port}=[^;]+; `));
    expect(setCookie).not.toContain(console.token);
    const attributes = setCookie
      .split(";")
      .slice(1)
      .map((part) => part.trim().toLowerCase());
    expect(attributes).toEqual(expect.arrayContaining(["httponly", "samesite=strict", "path=/"]));
    expect(signIn.headers.get("referrer-policy")).toBe("no-referrer");

    const cookie = cookieOf(setCookie);
    const status = await fetch(`${console.origin}/api/status`, { headers: { cookie } });
    expect(status.status).toBe(200);
    const session = (await (await fetch(`${console.origin}/api/session`, { headers: { cookie } })).json()) as {
      csrf: string;
      version: string;
    };
    expect(session.csrf).toEqual(expect.any(String));
    expect(session.csrf).not.toContain(console.token);

    const wrong = await fetch(`${console.origin}/?token=not-the-token`, { redirect: "manual" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
    // A person opened it: the page, which tells them to sign in with the address countd console prints.
    expect(wrong.headers.get("content-type")).toContain("text/html");
    expect(await wrong.text()).toContain('<script type="module"');
  });

  it("slows down repeated wrong tokens, on the sign-in address, the API and the WebSocket alike", async () => {
    const console = await start();
    for (let i = 0; i < 5; i++) expect((await fetch(`${console.origin}/?token=guess-${i}`, { redirect: "manual" })).status).toBe(401);
    // The sixth failure waits 250 ms, the seventh 500 ms, the eighth 1 s: only the least of these is asserted.
    let began = Date.now();
    expect((await console.api("/api/status", { headers: { authorization: "Bearer guess-6" } })).status).toBe(401);
    expect(Date.now() - began).toBeGreaterThanOrEqual(240);
    began = Date.now();
    const ws = await openLive(`ws://${console.host}/api/ws`, { headers: { authorization: "Bearer guess-7" } });
    expect(ws).toEqual({ ok: false, status: 401 });
    expect(Date.now() - began).toBeGreaterThanOrEqual(490);
    // The right token is never slowed by the failures.
    expect((await console.api("/api/status")).status).toBe(200);
  });

  it("refuses a foreign Host header (DNS rebinding) with 403 on the page, the sign-in, the API with the token and the WebSocket", async () => {
    const console = await start();
    const bearer = { authorization: `Bearer ${console.token}` };
    for (const host of [
      `evil.example:${console.port}`,
      `127.0.0.1.evil.example:${console.port}`,
      `localhost.evil.example:${console.port}`,
      `127.0.0.1:${console.port + 1}`,
      "127.0.0.1",
    ]) {
      for (const [path, headers] of [
        ["/", {}],
        ["/assets/app.js", {}],
        [`/?token=${console.token}`, {}],
        ["/api/status", bearer],
        ["/api/config", bearer],
      ] as const) {
        const answer = await raw({ port: console.port, path, headers: { host, ...headers } });
        expect(answer.status, `${host} ${path}`).toBe(403);
        expect(answer.json.error).toContain("Host");
        expect(answer.headers["set-cookie"]).toBeUndefined();
      }
      const change = await raw({ port: console.port, method: "POST", path: "/api/jobs/hello/pause", headers: { host, ...bearer } });
      expect(change.status).toBe(403);
      // A rebinding page's WebSocket carries its own name as Host and as Origin: they match each other, not the console.
      const ws = await openLive(`ws://${console.host}/api/ws`, { headers: { host, ...bearer }, origin: `http://${host}` });
      expect(ws, host).toEqual({ ok: false, status: 403 });
    }
    expect((await console.get<JobView>("/api/jobs/hello")).paused).toBe(false);
    // This machine's names for the console are answered.
    for (const host of [`localhost:${console.port}`, `127.0.0.1:${console.port}`, `[::1]:${console.port}`]) {
      expect((await raw({ port: console.port, path: "/api/status", headers: { host, ...bearer } })).status, host).toBe(200);
    }
  });

  it("WebSocket: a wrong Origin is refused, the console's own Origin with the cookie is accepted, a bearer token without Origin is accepted", async () => {
    const console = await start();
    const cookie = await signIn(console);
    const url = `ws://${console.host}/api/ws`;

    // Cross-site WebSocket hijacking: the browser sends the cookie, but with the other site's Origin.
    for (const origin of [
      "http://evil.example",
      `http://localhost:${console.port}`,
      `https://${console.host}`,
      "null",
      `http://${console.host}.evil.example`,
    ]) {
      expect(await openLive(url, { headers: { cookie }, origin }), origin).toEqual({ ok: false, status: 403 });
    }
    // A browser always sends Origin: a cookie without one is no browser of ours.
    expect(await openLive(url, { headers: { cookie } })).toEqual({ ok: false, status: 403 });
    expect(await openLive(url, { headers: { authorization: `Bearer ${console.token}` }, origin: "http://evil.example" })).toEqual({
      ok: false,
      status: 403,
    });
    expect(await openLive(url)).toEqual({ ok: false, status: 401 });
    expect(await openLive(url, { headers: { cookie: `countd_console_${console.port}=%E0%A4%A` }, origin: console.origin })).toEqual({
      ok: false,
      status: 401,
    });
    expect(await openLive(`ws://${console.host}/api/elsewhere`, { headers: { authorization: `Bearer ${console.token}` } })).toEqual({
      ok: false,
      status: 404,
    });

    const accepted: Array<Parameters<typeof openLive>[1]> = [
      { headers: { cookie }, origin: console.origin },
      { headers: { authorization: `Bearer ${console.token}` } },
    ];
    for (const options of accepted) {
      const opened = await openLive(url, options);
      expect(opened.ok).toBe(true);
      if (!opened.ok) continue;
      await opened.client.next((message) => message.type === "live", "live");
      opened.client.close();
    }
  });

  it("a malformed upgrade request or a client that resets mid-handshake does not stop the daemon", async () => {
    const console = await start();
    const send = (text: string, reset: boolean) =>
      new Promise<string>((resolve) => {
        const socket = connect(console.port, "127.0.0.1", () => {
          socket.write(text);
          if (reset) setImmediate(() => socket.resetAndDestroy());
        });
        let answer = "";
        socket.on("data", (data) => (answer += data.toString()));
        socket.on("error", () => resolve(answer));
        socket.on("close", () => resolve(answer));
      });
    const upgrade = (target: string, extra = "") =>
      `GET ${target} HTTP/1.1\r\nHost: ${console.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;
    expect(await send(upgrade("http://[", `Authorization: Bearer ${console.token}\r\n`), false)).toMatch(/^HTTP\/1\.1 400/);
    expect(await send(upgrade("/api/ws", `Cookie: countd_console_${console.port}=%\r\n`), false)).toMatch(/^HTTP\/1\.1 401/);
    for (let i = 0; i < 20; i++) await send(upgrade("/api/ws"), true);
    for (let i = 0; i < 5; i++) await send(upgrade("/api/ws", `Authorization: Bearer ${console.token}\r\n`), true);
    expect((await console.api("/api/status")).status).toBe(200);
    const opened = await openLive(`ws://${console.host}/api/ws`, { headers: { authorization: `Bearer ${console.token}` } });
    expect(opened.ok).toBe(true);
    if (opened.ok) opened.client.close();
  });

  it("a cross-site POST is refused 403 and changes nothing; the console's own page (cookie, CSRF header, Origin) may change things", async () => {
    const console = await start();
    const cookie = await signIn(console);
    const { csrf } = (await (await fetch(`${console.origin}/api/session`, { headers: { cookie } })).json()) as { csrf: string };

    const attempts: Array<[string, Record<string, string>, string?]> = [
      ["the cookie alone", { cookie }],
      [
        "a form from another site",
        { cookie, origin: "http://evil.example", "content-type": "application/x-www-form-urlencoded" },
        "job=hello",
      ],
      ["our Origin without the CSRF header", { cookie, origin: console.origin }],
      ["a guessed CSRF header", { cookie, origin: console.origin, "x-countd-csrf": "guess" }],
      ["the CSRF header from another site", { cookie, origin: "http://evil.example", "x-countd-csrf": csrf }],
    ];
    for (const [why, headers, body] of attempts) {
      for (const path of ["/api/jobs/hello/pause", "/api/jobs/hello/run", "/api/pause", "/api/outbox/dead/retry"]) {
        const answer = await fetch(`${console.origin}${path}`, { method: "POST", headers, ...(body ? { body } : {}) });
        expect(answer.status, `${why}: ${path}`).toBe(403);
        expect(((await answer.json()) as { error: string }).error).toContain("CSRF");
      }
    }
    expect(await runs(console)).toEqual([]);
    expect((await console.get<JobView>("/api/jobs/hello")).paused).toBe(false);
    expect((await console.get("/api/status")).jobs.paused_all).toBe(false);

    // Reading needs no CSRF proof: a cross-site page cannot read the answer, which grants no other origin (no CORS).
    expect((await fetch(`${console.origin}/api/jobs`, { headers: { cookie } })).status).toBe(200);
    const crossRead = await fetch(`${console.origin}/api/session`, { headers: { cookie, origin: "http://evil.example" } });
    expect(crossRead.headers.get("access-control-allow-origin")).toBeNull();
    expect(crossRead.headers.get("access-control-allow-credentials")).toBeNull();
    const preflight = await fetch(`${console.origin}/api/jobs/hello/pause`, {
      method: "OPTIONS",
      headers: {
        origin: "http://evil.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "x-countd-csrf",
      },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    expect(preflight.headers.get("access-control-allow-headers")).toBeNull();
    const paused = await fetch(`${console.origin}/api/jobs/hello/pause`, {
      method: "POST",
      headers: { cookie, origin: console.origin, "x-countd-csrf": csrf },
    });
    expect(paused.status).toBe(200);
    expect((await console.get<JobView>("/api/jobs/hello")).paused).toBe(true);
  });

  it("a running run cannot be cancelled cross-site", async () => {
    const held = gate();
    gates.push(held.open);
    mock.onMessage("hold the line", async () => {
      await held.wait;
      return { content: "done" };
    });
    const console = await start();
    await writeJob(console.dir, "long", "prompt: hold the line\n");
    await vi.waitFor(
      async () =>
        expect((await console.get<JobView[]>("/api/jobs").then((v: any) => v.jobs)).map((j: JobView) => j.name)).toContain("long"),
      SLOW,
    );
    const cookie = await signIn(console);
    const { body } = await console.post("/api/jobs/long/run");
    const refused = await fetch(`${console.origin}/api/runs/${body.run_id}/cancel`, {
      method: "POST",
      headers: { cookie, origin: "http://evil.example" },
    });
    expect(refused.status).toBe(403);
    expect((await console.get<RunView>(`/api/runs/${body.run_id}`)).running).toBe(true);
    held.open();
    expect(await endedRun(console, body.run_id)).toMatchObject({ status: "ok" });
  });

  it("never serves a secret's value: not in /api/config, the jobs, the outbox or a run's transcript", async () => {
    const dir = await consoleFolder({
      extra: [
        // Values named here are secrets to countd (the provider's key and smtp's password always are).
        "secrets: [EXTRA_TOKEN, HOOK_SECRET]",
        "job_env: [HOOK_SECRET, EXTRA_TOKEN]",
        "smtp:",
        "  host: 127.0.0.1",
        "  port: 1",
        "  from: countd@example.com",
        "  user: countd",
        "  password: ${SMTP_PASSWORD}",
        "",
      ].join("\n"),
    });
    const url = `http://127.0.0.1:1/hook`;
    await writeJob(
      dir,
      "leaky",
      `prompt: tell me the secrets\ndeliver:\n  - webhook:\n      url: ${url}\n      secret: \${HOOK_SECRET}\n      headers:\n        X-Extra: "Bearer \${EXTRA_TOKEN}"\n`,
    );
    mock.onMessage("tell me the secrets", {
      content: `The key is ${API_KEY}, the hook's is ${HOOK_SECRET}, mail's ${SMTP_PASSWORD} and ${EXTRA_TOKEN}.`,
    });
    const console = await startConsoleDaemon(dir, env);
    daemons.started.push(console);

    const config = await console.get("/api/config");
    expect(config.provider.apiKey).toBe("[REDACTED]");
    expect(config.smtp.password).toBe("[REDACTED]");
    expect(config).not.toHaveProperty("secrets");

    const { body } = await console.post("/api/jobs/leaky/run");
    await endedRun(console, body.run_id);
    await vi.waitFor(
      async () => expect((await console.get<RunView>(`/api/runs/${body.run_id}`)).transcript.steps.length).toBeGreaterThan(0),
      SLOW,
    );

    const answers: string[] = [];
    for (const path of [
      "/api/config",
      "/api/session",
      "/api/status",
      "/api/jobs",
      "/api/jobs/leaky",
      "/api/runs",
      `/api/runs/${body.run_id}`,
      "/api/outbox",
      "/api/stats",
    ]) {
      answers.push(JSON.stringify(await console.get(path)));
    }
    const served = answers.join("\n");
    for (const secret of [API_KEY, HOOK_SECRET, SMTP_PASSWORD, EXTRA_TOKEN, console.token]) expect(served).not.toContain(secret);
    expect(served).toContain("The key is [REDACTED]");
  });

  it("the Unix control socket is its owner's alone (mode 0600) and answers without a token, changes and the live stream included", async () => {
    const console = await start();
    expect((await stat(console.socket)).mode & 0o777).toBe(0o600);
    expect((await stat(join(console.daemon.config.paths.state, "console.token"))).mode & 0o777).toBe(0o600);
    const address = join(console.daemon.config.paths.state, "console.json");
    expect((await stat(address)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(address, "utf8"))).toEqual({ pid: process.pid, url: `${console.origin}/`, socket: console.socket });

    const status = await raw({ socketPath: console.socket, path: "/api/status" });
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ up: true, pid: process.pid });
    // No Host to check, no CSRF proof to give: the socket's mode already decided who may connect.
    const paused = await raw({ socketPath: console.socket, method: "POST", path: "/api/jobs/hello/pause", headers: { host: "anything" } });
    expect(paused).toMatchObject({ status: 200, json: { job: "hello", paused: true } });

    const held = gate();
    gates.push(held.open);
    mock.onMessage("hold the line", async () => {
      await held.wait;
      return { content: "done" };
    });
    await writeJob(console.dir, "long", "prompt: hold the line\n");
    await vi.waitFor(async () => expect((await raw({ socketPath: console.socket, path: "/api/jobs/long" })).status).toBe(200), SLOW);
    const opened = await openLive(`ws+unix://${console.socket}:/api/ws?job=long`);
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    const run = await raw({ socketPath: console.socket, method: "POST", path: "/api/jobs/long/run" });
    expect(run.json).toMatchObject({ status: "started" });
    await opened.client.next((message) => message.type === "run_started", "run_started");
    const cancel = await raw({ socketPath: console.socket, method: "POST", path: `/api/runs/${run.json.run_id}/cancel` });
    expect(cancel.status).toBe(200);
    const finished = await opened.client.next((message) => message.type === "run_finished", "run_finished");
    expect(finished).toMatchObject({ status: "cancelled", error: "cancelled with countd cancel" });
    opened.client.close();

    await console.stop();
    await expect(stat(console.socket)).rejects.toThrow();
    await expect(stat(address)).rejects.toThrow();
  });

  it("console.enabled: false: no TCP listener, and the control socket still answers", async () => {
    const probe = createServer();
    const port = await listenLoopback(probe);
    await new Promise((resolve) => probe.close(resolve));
    const console = await start({ console: `  enabled: false\n  listen: "127.0.0.1:${port}"\n` });
    expect(console.daemon.console.url).toBeUndefined();
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    expect(refused).toBe("ECONNREFUSED");
    expect(JSON.parse(await readFile(join(console.daemon.config.paths.state, "console.json"), "utf8"))).toEqual({
      pid: process.pid,
      socket: console.socket,
    });
    expect((await raw({ socketPath: console.socket, path: "/api/jobs" })).json.jobs.map((job: JobView) => job.name)).toEqual(["hello"]);
  });

  it("a non-loopback console.listen without allow_remote is a configuration error naming the field", async () => {
    for (const listen of ["0.0.0.0:7420", "192.168.1.20:7420", "console.example.org:443", "[::]:7420"]) {
      const dir = await consoleFolder({ console: `  listen: "${listen}"\n` });
      const err = await loadConfig({ file: join(dir, "countd.yaml"), env }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, listen).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message).toMatch(
        /countd\.yaml:2:\d+: console\.listen: is not a loopback address; .*console\.allow_remote: true/,
      );
      await expect(startDaemon({ configFile: join(dir, "countd.yaml"), env, logger: captureLog().log })).rejects.toThrow(
        /console\.listen: is not a loopback address/,
      );
    }
    const allowed = await consoleFolder({ console: '  listen: "0.0.0.0:7420"\n  allow_remote: true\n' });
    expect((await loadConfig({ file: join(allowed, "countd.yaml"), env })).console).toEqual({
      enabled: true,
      listen: { host: "0.0.0.0", port: 7420 },
      allowRemote: true,
      metricsPublic: false,
    });
  });

  it("with allow_remote the daemon warns to put a TLS reverse proxy in front, and leaves the Host to the proxy", async () => {
    const console = await start({ console: '  listen: "0.0.0.0:0"\n  allow_remote: true\n' });
    expect(console.log.some((line) => line.level === "warn" && line.msg.includes("reverse proxy with TLS"))).toBe(true);
    const answer = await raw({
      port: console.port,
      path: "/api/status",
      headers: { host: "console.example.org", authorization: `Bearer ${console.token}` },
    });
    expect(answer.status).toBe(200);
    expect((await raw({ port: console.port, path: "/api/status", headers: { host: "console.example.org" } })).status).toBe(401);
  });
});

describe("countd start with the console's port in use", () => {
  it("exits 78 with one line naming console.listen", async () => {
    const squatter = createServer();
    const port = await listenLoopback(squatter);
    try {
      const dir = await consoleFolder({ console: `  listen: "127.0.0.1:${port}"\n` });
      await writeFile(join(dir, "jobs", "hello.yaml"), "prompt: say hello\n");
      // COUNTD_CONSOLE_LISTEN empty: countd.yaml's console.listen applies.
      const daemon = spawnDaemon(dir, { COUNTD_CONSOLE_LISTEN: "", OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: "http://127.0.0.1:1/v1" });
      expect(await daemon.exited).toBe(78);
      const lines = daemon
        .output()
        .split("\n")
        .filter((line) => line.trim() !== "" && logLines(line).length === 0);
      expect(lines).toEqual([
        `countd: console.listen 127.0.0.1:${port}: the port is in use (another countd, or another program); choose another port, or 0 for a free one`,
      ]);
      // Nothing of the failed start is left for the next one.
      await expect(stat(join(dir, "state", "console.json"))).rejects.toThrow();
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  }, 30_000);
});
