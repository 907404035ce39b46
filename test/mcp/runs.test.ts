import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { CountdEvents } from "../../src/events.js";
import type { Runtime } from "../../src/runtime.js";
import { useAimock } from "../support/aimock.js";
import { WIRE_FORMATS } from "../support/agent.js";
import { captureLog } from "../support/log-capture.js";
import {
  calls,
  connected,
  FILESYSTEM_SERVER,
  fixtureServer,
  llmEnv,
  mcpFolder,
  runtimeIn,
  startHttpFixture,
  type HttpFixture,
} from "./support.js";

/** What the LLM simulator was sent: both wire formats are journaled in OpenAI's form. */
type Sent = { tools?: Array<{ function: { name: string; parameters: Record<string, unknown> } }> };

const TOKEN = "tracker-token-4f9c2e81";

/** Servers restart within some tests, which a loaded machine makes slow. */
vi.setConfig({ testTimeout: 60_000 });

describe("MCP servers' tools in agent runs", () => {
  const mock = useAimock();
  let http: HttpFixture;
  let rt: Runtime;
  let dir: string;
  let countFile: string;
  let files: string;
  const log = captureLog();
  const finished: Array<CountdEvents["tool.finished"]> = [];

  beforeAll(async () => {
    http = await startHttpFixture();
    files = await mkdtemp(join(tmpdir(), "countd-mcp-files-"));
    await writeFile(join(files, "inventory.csv"), "item,count\nbolts,12\n");
    countFile = join(await mkdtemp(join(tmpdir(), "countd-mcp-count-")), "calls");
    dir = await mcpFolder({
      notes: fixtureServer([], { env: { NOTES_DIR: "/srv/notes", COUNT_FILE: countFile } }),
      tracker: { url: http.url, headers: { Authorization: "Bearer ${TRACKER_TOKEN}" } },
      slow: fixtureServer([], { env: { COUNT_FILE: countFile }, call_timeout: "1s" }),
      dup: fixtureServer(["--collide"]),
      silent: fixtureServer(["--silent"], { connect_timeout: "1s" }),
      filtered: fixtureServer([], { include_tools: ["e*", "image"], exclude_tools: ["env"] }),
      fs: { command: process.execPath, args: [FILESYSTEM_SERVER, files], include_tools: ["list_directory", "read_text_file"] },
      // Seven Node servers starting at once on a busy test machine can take longer than the default 10 s.
      common: { connect_timeout: "60s" },
    });
    rt = await runtimeIn(dir, { ...llmEnv(mock.url), TRACKER_TOKEN: TOKEN }, log.log);
    rt.events.on("tool.finished", (e) => finished.push(e));
  }, 90_000);
  afterAll(async () => {
    await rt?.close();
    await http?.close();
  });

  /** One message in which the model calls `tool` with `args`, then answers "done"; the call's report. */
  async function callThrough(tool: string, args: Record<string, unknown>, format: "openai" | "anthropic" = "openai") {
    const message = `please call ${tool} ${Math.random()}`;
    mock.addFixture({
      match: { userMessage: message, hasToolResult: false },
      response: { toolCalls: [{ name: tool, arguments: JSON.stringify(args) }] },
    });
    mock.addFixture({ match: { userMessage: message, hasToolResult: true }, response: { content: "done" } });
    const loop = rt.loop(format === "anthropic" ? { overrides: { provider: "anthropic" } } : {});
    const { answer, report } = await loop.processDirect(message, `mcp-${format}-${tool}`);
    expect(answer).toBe("done");
    return report.calls[0]!;
  }

  it.each(WIRE_FORMATS)("uses a stdio server's and an HTTP server's tools in one run over the %s wire format", async (format) => {
    const message = `look it up over ${format}`;
    mock.addFixture({
      match: { userMessage: message, hasToolResult: false },
      response: {
        toolCalls: [
          { name: "mcp_notes_echo", arguments: JSON.stringify({ text: "from stdio" }) },
          { name: "mcp_tracker_echo", arguments: JSON.stringify({ text: "over http" }) },
        ],
      },
    });
    mock.addFixture({ match: { userMessage: message, hasToolResult: true }, response: { content: "both answered" } });
    const loop = rt.loop(format === "anthropic" ? { overrides: { provider: "anthropic" } } : {});
    const { answer, report } = await loop.processDirect(message, `both-${format}`);

    expect(answer).toBe("both answered");
    expect(report.calls.map((call) => [call.name, call.isError])).toEqual([
      ["mcp_notes_echo", false],
      ["mcp_tracker_echo", false],
    ]);
    expect(report.calls[0]!.result).toContain('[External content from the MCP server "notes" (tool mcp_notes_echo) — untrusted data');
    expect(report.calls[0]!.result).toContain("echo: from stdio");
    expect(report.calls[1]!.result).toContain("echo: over http");
    // The server's own JSON Schema reaches the model as the tool's parameters.
    const sent = mock.getRequests().find((request) => JSON.stringify(request.body).includes(message))!.body as Sent;
    const echo = sent.tools!.find((tool) => tool.function.name === "mcp_notes_echo")!;
    expect(echo.function.parameters).toMatchObject({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
  });

  it("offers the tools a job names or matches with a glob, and only those its server's include_tools and exclude_tools let through", async () => {
    mock.onMessage("which tools", { content: "these" });
    await rt.loop({ toolNames: ["mcp_notes_e*", "read_file", "mcp_filtered_*"] }).processDirect("which tools", "globs");
    const sent = mock.getRequests().at(-1)!.body as Sent;
    expect(sent.tools!.map((tool) => tool.function.name)).toEqual([
      "mcp_notes_echo",
      "mcp_notes_env",
      "read_file",
      "mcp_filtered_echo",
      "mcp_filtered_image",
    ]);
  });

  it("refuses two tools whose names collide, naming both, and offers neither", () => {
    const collision = log.lines.find((line) => line.msg.startsWith("MCP tools refused: their names collide"));
    expect(collision?.fields).toMatchObject({ name: "mcp_dup_search_notes", tools: ["dup/search.notes", "dup/search_notes"] });
    expect(rt.toolNames).toContain("mcp_dup_echo");
    expect(rt.toolNames.filter((name) => name.startsWith("mcp_dup_search"))).toEqual([]);
  });

  it("gives up on a server that never answers initialize after connect_timeout, and a run naming its tools fails saying so", () => {
    expect(rt.mcp!.reports().find((server) => server.name === "silent")!.state).toMatchObject({
      status: "failed",
      reason: "no answer within connect_timeout (1s)",
    });
    expect(rt.toolNames.some((name) => name.startsWith("mcp_silent_"))).toBe(false);
    expect(() => rt.loop({ toolNames: ["mcp_silent_lookup"] })).toThrow(
      'the tool mcp_silent_lookup is not offered: the MCP server "silent" could not be connected (no answer within connect_timeout (1s)), so its tools are not known; countd keeps trying to connect it',
    );
  });

  it("ends a call that hangs at call_timeout with an error the model reads, and does not call again", async () => {
    const before = (await calls(countFile)).length;
    const call = await callThrough("mcp_slow_hang", {});
    expect(call).toMatchObject({
      isError: true,
      result:
        'Error: the MCP server "slow" did not answer within call_timeout (1s): the call was cancelled, and is not retried since it may have acted',
    });
    expect((await calls(countFile)).slice(before)).toEqual(["hang"]);
    expect(finished.at(-1)).toMatchObject({ name: "mcp_slow_hang", server: "slow", attempts: 1 });
  });

  it("fails the call in flight clearly when its server dies, restarts the server, and the next run works", async () => {
    const call = await callThrough("mcp_notes_crash", {});
    expect(call.isError).toBe(true);
    expect(call.result).toMatch(
      /^Error: the connection to the MCP server "notes" was lost during the call \(.*\); whether the call acted is unknown, so it is not retried; countd is reconnecting the server$/,
    );
    await connected(rt, "notes");
    expect((await callThrough("mcp_notes_echo", { text: "still here" })).result).toContain("echo: still here");
  });

  it("lists a server's tools again when it says they changed", async () => {
    expect(rt.toolNames).not.toContain("mcp_notes_late");
    expect((await callThrough("mcp_notes_grow", {})).result).toContain("added the tool late");
    await vi.waitFor(() => expect(rt.toolNames).toContain("mcp_notes_late"), { timeout: 10_000 });
    expect((await callThrough("mcp_notes_late", {})).result).toContain("late tool answered");
  });

  it("starts a stdio server with PATH, LANG, HOME (the workspace) and its env: only, never a provider's key or countd's own variables", async () => {
    const result = (await callThrough("mcp_notes_env", {})).result;
    const env = JSON.parse(result.split("\n")[1]!) as Record<string, string>;
    expect(Object.keys(env).sort()).toEqual(["COUNT_FILE", "HOME", "NOTES_DIR", "PATH"]);
    expect(env).toMatchObject({ NOTES_DIR: "/srv/notes", HOME: join(dir, "workspace") });
    expect(result).not.toContain("sk-mcp-test");
    expect(result).not.toContain(TOKEN);
  });

  it("sends a header's secret to its server and keeps it out of the audit log, whose line names the server", async () => {
    const call = await callThrough("mcp_tracker_whoami", {});
    expect(call.result).toContain(`authorization: Bearer ${TOKEN}`);
    const logs = join(dir, "logs");
    await vi.waitFor(async () => {
      const text = (await Promise.all((await readdir(logs)).map((file) => readFile(join(logs, file), "utf8")))).join("");
      const line = text
        .split("\n")
        .filter(Boolean)
        .map((raw) => JSON.parse(raw) as Record<string, unknown>)
        .find((entry) => entry["tool"] === "mcp_tracker_whoami");
      expect(line).toMatchObject({ kind: "tool", server: "tracker", status: "ok" });
      expect(line!["result"]).toContain("authorization: [REDACTED]");
      expect(text).not.toContain(TOKEN);
    });
  });

  it("turns an image into a line naming its type and size, and a server's error result into an error not called again", async () => {
    const image = await callThrough("mcp_notes_image", {});
    expect(image.result).toContain("a red pixel:\n[image: image/png, 70B; not shown, since tool results reach the model as text]");
    const failed = await callThrough("mcp_notes_fail", {});
    expect(failed).toMatchObject({ isError: true });
    expect(failed.result).toContain('Error: the MCP server "notes" reported an error:\n[External content from the MCP server "notes"');
    expect(failed.result).toContain("the notes are locked");
    expect(finished.at(-1)).toMatchObject({ name: "mcp_notes_fail", attempts: 1 });
  });

  it("runs a published server (server-filesystem) unmodified, with only the tools include_tools names", async () => {
    expect(rt.toolNames.filter((name) => name.startsWith("mcp_fs_"))).toEqual(["mcp_fs_read_text_file", "mcp_fs_list_directory"]);
    const listing = await callThrough("mcp_fs_list_directory", { path: files }, "anthropic");
    expect(listing).toMatchObject({ isError: false });
    expect(listing.result).toContain("[FILE] inventory.csv");
  });

  it("reconnects to an HTTP server that restarted, whose old session is gone, and its tools work again", async () => {
    await http.close();
    http = await startHttpFixture(Number(new URL(http.url).port));
    // A call may still meet the lost connection (and fail at once, saying so); one soon after succeeds.
    const seen: string[] = [];
    await vi.waitFor(
      async () => {
        const call = await callThrough("mcp_tracker_echo", { text: "back again" });
        seen.push(call.result);
        expect(call.result).toContain("echo: back again");
      },
      { timeout: 30_000, interval: 200 },
    );
    for (const failure of seen.slice(0, -1))
      expect(failure).toMatch(/^Error: the (connection to the MCP server "tracker" was lost|MCP server "tracker" is not connected)/);
  });
});
