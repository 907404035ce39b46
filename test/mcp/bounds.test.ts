import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Runtime } from "../../src/runtime.js";
import { useAimock } from "../support/aimock.js";
import { captureLog } from "../support/log-capture.js";
import { calls, HOSTILE, llmEnv, mcpFolder, runtimeIn, startHttpFixture, type HttpFixture } from "./support.js";

/** What the LLM simulator was sent, in OpenAI's form. */
type Sent = { tools?: Array<{ function: { name: string; description: string } }> };

vi.setConfig({ testTimeout: 60_000 });

const hostile = (env: Record<string, string>, more: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [HOSTILE],
  env,
  ...more,
});

describe("what an MCP server sends is bounded", () => {
  const mock = useAimock();
  const log = captureLog();
  let rt: Runtime;
  let web: HttpFixture;
  let slowWeb: HttpFixture;
  let scratch: string;
  const file = (name: string) => join(scratch, name);
  const written = async (name: string) => Number((await readFile(file(name), "utf8").catch(() => "0")) || 0);

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), "countd-mcp-bounds-"));
    // Fast enough to pass 4 MB in well under a second, slow enough not to flood the test's own memory on a client that reads for ever.
    web = await startHttpFixture(0, HOSTILE, { FLOOD_DELAY_MS: "5", BYTES_FILE: file("web-bytes"), COUNT_FILE: file("web-count") });
    // 640 KB a second: call_timeout comes before the message bound.
    slowWeb = await startHttpFixture(0, HOSTILE, { FLOOD_DELAY_MS: "100", BYTES_FILE: file("slow-bytes"), COUNT_FILE: file("slow-count") });
    const dir = await mcpFolder({
      hostile: hostile({}),
      pipe: hostile({ PID_FILE: file("pipe-pid") }, { call_timeout: "20s" }),
      web: { url: web.url, call_timeout: "20s" },
      slowweb: { url: slowWeb.url, call_timeout: "2s" },
      storm: hostile({ COUNT_FILE: file("storm-count") }),
      pages: hostile({ COUNT_FILE: file("pages-count") }),
      many: hostile({ COUNT_FILE: file("many-count"), PAGE_SIZE: "100" }),
      common: { connect_timeout: "60s" },
    });
    rt = await runtimeIn(dir, llmEnv(mock.url), log.log);
  }, 90_000);
  afterAll(async () => {
    await rt?.close();
    await web?.close();
    await slowWeb?.close();
  });

  /** One message in which the model calls `tool`, then answers "done"; the call's report. */
  async function callThrough(tool: string) {
    const message = `please call ${tool} ${Math.random()}`;
    mock.addFixture({ match: { userMessage: message, hasToolResult: false }, response: { toolCalls: [{ name: tool, arguments: "{}" }] } });
    mock.addFixture({ match: { userMessage: message, hasToolResult: true }, response: { content: "done" } });
    const { answer, report } = await rt.loop().processDirect(message, `bounds-${tool}`);
    expect(answer).toBe("done");
    return report.calls[0]!;
  }

  /** Until the count in BYTES_FILE `name` has not grown for a second; that count. */
  async function settled(name: string): Promise<number> {
    let last = -1;
    for (;;) {
      const now = await written(name);
      if (now === last) return now;
      last = now;
      await sleep(1_000);
    }
  }

  it("keeps the event loop running while a result meets an output schema whose pattern backtracks, and returns the result unchecked", async () => {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const call = await callThrough("mcp_hostile_match");
    lag.disable();
    expect(lag.max / 1e6).toBeLessThan(1_000);
    expect(call).toMatchObject({ isError: false });
    expect(call.result).toContain("matched");
  });

  it("stops reading an HTTP answer at 4 MB, fails the call saying so, and closes the connection", async () => {
    const started = Date.now();
    const call = await callThrough("mcp_web_flood");
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(call).toMatchObject({ isError: true });
    expect(call.result).toContain('the MCP server "web"');
    expect(call.result).toContain("sent a message over 4MB, more than countd reads");
    await vi.waitFor(async () => expect(await calls(file("web-count"))).toContain("closed"), { timeout: 5_000 });
    expect(await settled("web-bytes")).toBeLessThan(16 * 1024 * 1024);
  });

  it("stops reading an HTTP answer when its call times out, and closes the connection", async () => {
    const call = await callThrough("mcp_slowweb_flood");
    expect(call).toMatchObject({ isError: true });
    expect(call.result).toContain("did not answer within call_timeout (2s)");
    await vi.waitFor(async () => expect(await calls(file("slow-count"))).toContain("closed"), { timeout: 5_000 });
    // 2 s at 640 KB/s, and what the socket buffers hold.
    expect(await settled("slow-bytes")).toBeLessThan(4 * 1024 * 1024);
  });

  it("stops reading a stdio server's line at 4 MB, fails the call saying so, and stops the server", async () => {
    const started = Date.now();
    const call = await callThrough("mcp_pipe_flood");
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(call).toMatchObject({ isError: true });
    expect(call.result).toContain("sent a message over 4MB, more than countd reads");
    const [pid] = await calls(file("pipe-pid"));
    // Stopped as any server is (stdin closed, SIGTERM 2 s later, SIGKILL 2 s after that); its memory is 4 MB meanwhile.
    await vi.waitFor(() => expect(() => process.kill(Number(pid), 0)).toThrow(), { timeout: 10_000 });
  });

  it("lists a storm of list_changed notifications once or twice, with at most one log line", async () => {
    const before = (await calls(file("storm-count"))).length;
    const linesBefore = log.lines.length;
    expect((await callThrough("mcp_storm_storm")).result).toContain("stormed");
    await sleep(4_000);
    expect((await calls(file("storm-count"))).length - before).toBeLessThanOrEqual(3);
    const relisted = log.lines
      .slice(linesBefore)
      .filter((line) => line.fields["server"] === "storm" && line.level !== "debug" && /listed again/.test(line.msg));
    expect(relisted.length).toBeLessThanOrEqual(1);
  });

  it("follows a tool list that never ends for 20 pages, offers those tools and says the list was cut", async () => {
    const before = (await calls(file("pages-count"))).length;
    expect((await callThrough("mcp_pages_paginate")).result).toContain("paginating");
    await vi.waitFor(() => expect(rt.toolNames).toContain("mcp_pages_page19_tool0"), { timeout: 15_000 });
    await sleep(2_000);
    expect((await calls(file("pages-count"))).length - before).toBe(20);
    expect(rt.toolNames.filter((name) => name.startsWith("mcp_pages_"))).toHaveLength(20);
    expect(log.lines.find((line) => line.fields["server"] === "pages" && line.level === "warn")?.msg).toBe(
      "MCP server's tool list cut short: the server's tool list has more than 20 pages; countd offers the tools of the first 20",
    );
  });

  it("offers at most 500 tools of one server", async () => {
    const before = (await calls(file("many-count"))).length;
    expect((await callThrough("mcp_many_paginate")).result).toContain("paginating");
    await vi.waitFor(() => expect(rt.toolNames).toContain("mcp_many_page4_tool99"), { timeout: 15_000 });
    await sleep(2_000);
    expect((await calls(file("many-count"))).length - before).toBe(5);
    expect(rt.toolNames.filter((name) => name.startsWith("mcp_many_"))).toHaveLength(500);
    expect(log.lines.find((line) => line.fields["server"] === "many" && line.level === "warn")?.msg).toBe(
      "MCP server's tool list cut short: the server's list goes on past 500 tools; countd offers the first 500",
    );
  });

  it("offers the model the first 2,000 characters of a 200 KB description, saying it was cut", async () => {
    mock.onMessage("which tools", { content: "these" });
    await rt.loop({ toolNames: ["mcp_hostile_verbose"] }).processDirect("which tools", "verbose");
    const sent = mock.getRequests().at(-1)!.body as Sent;
    const description = sent.tools!.find((tool) => tool.function.name === "mcp_hostile_verbose")!.function.description;
    expect(description.length).toBeLessThan(2_200);
    expect(description).toMatch(/^A tool described at length\. blah blah/);
    expect(description).toMatch(/ \[description cut: it has 200028 characters; countd offers the first 2000\]$/);
  });
});
