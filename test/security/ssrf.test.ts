import { createServer } from "node:http";
import net from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { ToolRefusal } from "../../src/tools/paths.js";
import type { ResolvedAddress } from "../../src/tools/ssrf.js";
import { webFetchTool, type WebFetchOptions } from "../../src/tools/web.js";
import { closeServer, listenLoopback } from "../support/loopback.js";

/** The loopback server an attack would like to reach; every request and connection it sees is counted. */
const received: string[] = [];
let connections = 0;
const server = createServer((req, res) => {
  received.push(req.url ?? "");
  if (req.url === "/to-loopback") res.writeHead(302, { location: `http://127.0.0.1:${port}/secret` }).end();
  else if (req.url === "/to-metadata") res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
  else if (req.url === "/to-file") res.writeHead(302, { location: "file:///etc/passwd" }).end();
  else res.writeHead(200, { "content-type": "text/plain" }).end("internal secret");
});
server.on("connection", () => connections++);
let port: number;

/**
 * Every socket connect, seen before it happens. Only the loopback server (directly or through a
 * name the test maps to it) may be dialled; anything else is blocked, so a policy bug can never
 * send traffic to a private or public address from this test.
 */
const dialled: string[] = [];
const DIALLABLE = new Set(["127.0.0.1", "public.example", "rebind.example"]);
const realConnect = net.Socket.prototype.connect;

beforeAll(async () => {
  port = await listenLoopback(server);
  vi.spyOn(net.Socket.prototype, "connect").mockImplementation(function (this: net.Socket, ...args: unknown[]) {
    const first = Array.isArray(args[0]) ? (args[0][0] as unknown) : args[0];
    const host = typeof first === "object" && first !== null ? String((first as { host?: string }).host) : String(args[1] ?? "localhost");
    dialled.push(host);
    if (!DIALLABLE.has(host)) throw new Error(`test guard: blocked a connection to ${host}`);
    return (realConnect as (...a: unknown[]) => net.Socket).apply(this, args);
  });
});
afterAll(async () => {
  vi.restoreAllMocks();
  await closeServer(server);
});
beforeEach(() => {
  received.length = 0;
  dialled.length = 0;
  connections = 0;
});

function fetchWith(options: Partial<WebFetchOptions>) {
  const tool = webFetchTool({ allowHosts: [], ...options });
  return (url: string) =>
    tool.execute(tool.parameters.parse({ url }), { sessionId: "test", workspace: "/nonexistent", signal: new AbortController().signal });
}

/** A resolver for made-up names, recording what it was asked; unknown names fail like DNS would. */
function fakeDns(table: Record<string, ResolvedAddress[]>) {
  const asked: string[] = [];
  const lookup = async (hostname: string) => {
    asked.push(hostname);
    const found = table[hostname];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return found;
  };
  return { lookup, asked };
}

async function expectRefusal(attempt: Promise<string>, message: string | RegExp) {
  const error = await attempt.then(
    (out) => {
      throw new Error(`expected a refusal, got content:\n${out}`);
    },
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ToolRefusal);
  expect((error as Error).message).toMatch(message);
}

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });
const HINT = "web_fetch only reaches public addresses; tools.web.allow_hosts in the config can open a host";

describe("web_fetch refuses addresses inside the machine or its network", () => {
  const literalCases: [string, (port: number) => string, (port: number) => string][] = [
    [
      "loopback",
      (port) => `http://127.0.0.1:${port}/`,
      (port) => `refused to fetch http://127.0.0.1:${port}/: 127.0.0.1 is a loopback address. ${HINT}`,
    ],
    ["IPv6 loopback", (port) => `http://[::1]:${port}/`, () => "::1 is a loopback address"],
    ["the unspecified address", (port) => `http://0.0.0.0:${port}/`, () => "0.0.0.0 is an unspecified address"],
    [
      "cloud metadata",
      () => "http://169.254.169.254/latest/meta-data",
      () => "169.254.169.254 is a link-local address (where cloud metadata services live)",
    ],
    ["loopback in decimal", (port) => `http://2130706433:${port}/`, (port) => `http://127.0.0.1:${port}/: 127.0.0.1 is a loopback address`],
    ["loopback in hex", (port) => `http://0x7f000001:${port}/`, (port) => `http://127.0.0.1:${port}/: 127.0.0.1 is a loopback address`],
    ["loopback in octal", (port) => `http://0177.0.0.1:${port}/`, (port) => `http://127.0.0.1:${port}/: 127.0.0.1 is a loopback address`],
    ["loopback in short form", (port) => `http://127.1:${port}/`, (port) => `http://127.0.0.1:${port}/: 127.0.0.1 is a loopback address`],
    ["IPv4-mapped loopback", (port) => `http://[::ffff:127.0.0.1]:${port}/`, () => "::ffff:7f00:1 (127.0.0.1) is a loopback address"],
    ["NAT64 loopback", (port) => `http://[64:ff9b::127.0.0.1]:${port}/`, () => "64:ff9b::7f00:1 (127.0.0.1) is a loopback address"],
    ["credentials in front of loopback", (port) => `http://user:pw@127.0.0.1:${port}/`, () => "127.0.0.1 is a loopback address"],
    ["an upper-case scheme and host", (port) => `HTTP://[::1]:${port}/`, () => "::1 is a loopback address"],
    ["private 10/8", () => "http://10.0.0.1/", () => "10.0.0.1 is a private-network address"],
    ["private 172.16/12", () => "http://172.16.0.1/", () => "172.16.0.1 is a private-network address"],
    ["private 192.168/16", () => "http://192.168.1.1/admin", () => "192.168.1.1 is a private-network address"],
    ["carrier-grade NAT", () => "http://100.64.0.1/", () => "100.64.0.1 is a carrier-grade NAT address"],
    ["IPv6 unique-local", () => "http://[fd00::1]/", () => "fd00::1 is a unique-local address"],
    ["IPv6 link-local", () => "http://[fe80::1]/", () => "fe80::1 is a link-local address"],
    ["IPv4 multicast", () => "http://224.0.0.1/", () => "224.0.0.1 is a multicast address"],
    ["broadcast", () => "http://255.255.255.255/", () => "255.255.255.255 is the broadcast address"],
    ["IPv6 unspecified", () => "http://[::]/", () => ":: is an unspecified address"],
  ];

  it.each(literalCases)("refuses %s before connecting", async (_name, url, message) => {
    const dns = fakeDns({});
    await expectRefusal(fetchWith({ lookup: dns.lookup })(url(port)), message(port));
    expect(dns.asked).toEqual([]);
    expect(dialled).toEqual([]);
    expect(received).toEqual([]);
    expect(connections).toBe(0);
  });

  it("refuses localhost, judged by the addresses the system resolver gives", async () => {
    await expectRefusal(fetchWith({})(`http://localhost:${port}/`), /"localhost" resolves to (127\.0\.0\.1|::1), a loopback address/);
    expect(dialled).toEqual([]);
    expect(received).toEqual([]);
  });

  it("refuses a name that resolves to loopback", async () => {
    const dns = fakeDns({ "evil.example": [v4("127.0.0.1")] });
    await expectRefusal(
      fetchWith({ lookup: dns.lookup })(`http://evil.example:${port}/`),
      `refused to fetch http://evil.example:${port}/: "evil.example" resolves to 127.0.0.1, a loopback address`,
    );
    expect(dns.asked).toEqual(["evil.example"]);
    expect(dialled).toEqual([]);
    expect(received).toEqual([]);
  });

  it("refuses a name with one public and one private address, since the socket may pick either", async () => {
    const dns = fakeDns({ "mixed.example": [v4("93.184.215.14"), v4("10.0.0.5")] });
    await expectRefusal(
      fetchWith({ lookup: dns.lookup })("http://mixed.example/"),
      '"mixed.example" resolves to 10.0.0.5, a private-network address',
    );
    expect(dialled).toEqual([]);
  });

  it("refuses a name that resolves to an IPv4-mapped loopback address", async () => {
    const dns = fakeDns({ "mapped.example": [v6("::ffff:127.0.0.1")] });
    await expectRefusal(
      fetchWith({ lookup: dns.lookup })(`http://mapped.example:${port}/`),
      "::ffff:7f00:1 (127.0.0.1), a loopback address",
    );
    expect(dialled).toEqual([]);
    expect(received).toEqual([]);
  });

  it("refuses a name that resolves to cloud metadata", async () => {
    const dns = fakeDns({ "metadata.example": [v4("169.254.169.254")] });
    await expectRefusal(
      fetchWith({ lookup: dns.lookup })("http://metadata.example/latest/meta-data"),
      "resolves to 169.254.169.254, a link-local address",
    );
    expect(dialled).toEqual([]);
  });

  it("does not open 127.0.0.1 when only another address is allowed", async () => {
    await expectRefusal(
      fetchWith({ allowHosts: ["10.0.0.0/8", "intranet.example"] })(`http://127.0.0.1:${port}/`),
      "127.0.0.1 is a loopback address",
    );
    expect(received).toEqual([]);
  });
});

describe("web_fetch checks every redirect again", () => {
  // public.example stands for a page the allow-list opened; it is served by the loopback server.
  const publicPage = () => fetchWith({ allowHosts: ["public.example"], lookup: fakeDns({ "public.example": [v4("127.0.0.1")] }).lookup });

  it("refuses a redirect to loopback, although the first hop was allowed", async () => {
    await expectRefusal(
      publicPage()(`http://public.example:${port}/to-loopback`),
      `refused to fetch http://127.0.0.1:${port}/secret: 127.0.0.1 is a loopback address. ${HINT} (reached by a redirect from http://public.example:${port}/to-loopback)`,
    );
    expect(received).toEqual(["/to-loopback"]);
    expect(dialled).toEqual(["public.example"]);
  });

  it("refuses a redirect to cloud metadata", async () => {
    await expectRefusal(publicPage()(`http://public.example:${port}/to-metadata`), "169.254.169.254 is a link-local address");
    expect(received).toEqual(["/to-metadata"]);
    expect(dialled).toEqual(["public.example"]);
  });

  it("refuses a redirect to a file: URL", async () => {
    await expectRefusal(
      publicPage()(`http://public.example:${port}/to-file`),
      `refused: http://public.example:${port}/to-file redirects to file:///etc/passwd, and web_fetch only fetches http and https URLs, not file:`,
    );
    expect(received).toEqual(["/to-file"]);
  });
});

describe("web_fetch connects to the address it checked", () => {
  it("does not ask DNS again when connecting, so a rebinding answer is never used", async () => {
    let calls = 0;
    const lookup = async () => (++calls === 1 ? [v4("127.0.0.1")] : [v4("10.0.0.1")]);
    const out = await fetchWith({ allowHosts: ["127.0.0.1"], lookup })(`http://rebind.example:${port}/page`);
    expect(out).toContain("internal secret");
    expect(calls).toBe(1);
    expect(received).toEqual(["/page"]);
  });
});

describe("web_fetch refuses schemes other than http and https", () => {
  it.each([
    ["file:///etc/passwd", "not file:"],
    [`ftp://127.0.0.1:${21}/`, "not ftp:"],
    ["gopher://127.0.0.1:6379/_FLUSHALL", "not gopher:"],
    ["data:text/plain,hello", "not data:"],
  ])("refuses %s", async (url, message) => {
    await expectRefusal(fetchWith({ allowHosts: ["127.0.0.1"] })(url), `refused: web_fetch only fetches http and https URLs, ${message}`);
    expect(dialled).toEqual([]);
  });
});

describe("the allow-list", () => {
  // The control for every "received nothing" above: opened explicitly, the same server answers.
  it("opens a loopback host when it is named", async () => {
    const out = await fetchWith({ allowHosts: ["127.0.0.1"] })(`http://127.0.0.1:${port}/page`);
    expect(out).toContain("internal secret");
    expect(received).toEqual(["/page"]);
  });

  it("opens an address range given as CIDR", async () => {
    const out = await fetchWith({ allowHosts: ["127.0.0.0/8"] })(`http://127.0.0.1:${port}/page`);
    expect(out).toContain("internal secret");
  });

  it("opens the IPv4-mapped form of an allowed address", async () => {
    const dns = fakeDns({ "public.example": [v6("::ffff:127.0.0.1")] });
    const out = await fetchWith({ allowHosts: ["127.0.0.1"], lookup: dns.lookup })(`http://public.example:${port}/page`);
    expect(out).toContain("internal secret");
  });
});
