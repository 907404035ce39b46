import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { logLines, runCountd, spawnDaemon } from "../support/daemon-process.js";
import { fixtureServer, llmEnv, mcpFolder } from "./support.js";

/** Each test starts Node servers and countd processes, which a loaded machine makes slow. */
vi.setConfig({ testTimeout: 90_000 });

/** Generous for a loaded test machine; the silent server's own 1 s is what a test waits for. */
const common = { connect_timeout: "60s" };

const countd = (dir: string, args: string[], env: Record<string, string> = {}) => runCountd(args, { cwd: dir, env });

describe("countd mcp", () => {
  it("lists each server's state and tools, with the reason a server failed, and exits 1 when one did", async () => {
    const dir = await mcpFolder({
      notes: fixtureServer([], { exclude_tools: ["hang", "crash", "grow", "image", "fail", "whoami"] }),
      dup: fixtureServer(["--collide"], { include_tools: ["search*"] }),
      silent: fixtureServer(["--silent"], { connect_timeout: "1s" }),
      common,
    });
    const run = await countd(dir, ["mcp"]);
    expect(run.stdout).toBe(
      [
        "notes  connected, 2 tools (6 left out by include_tools/exclude_tools)",
        "  mcp_notes_echo  Echo the text back",
        "  mcp_notes_env   The server's environment",
        "",
        "dup  connected, 0 tools (8 left out by include_tools/exclude_tools)",
        "  refused, their names collide as mcp_dup_search_notes: dup/search.notes, dup/search_notes",
        "",
        "silent  failed: no answer within connect_timeout (1s)",
        "",
      ].join("\n"),
    );
    expect(run.code).toBe(1);
  });

  it("calls one tool and prints its result; refuses a tool the server does not offer and arguments that are not a JSON object", async () => {
    const dir = await mcpFolder({ notes: fixtureServer([], { exclude_tools: ["crash"] }), common });
    expect(await countd(dir, ["mcp", "call", "notes", "echo", '{"text":"hello"}'])).toEqual({
      code: 0,
      stdout: "echo: hello\n",
      stderr: "",
    });
    expect(await countd(dir, ["mcp", "call", "notes", "fail"])).toEqual({ code: 1, stdout: "", stderr: "the notes are locked\n" });
    const missing = await countd(dir, ["mcp", "call", "notes", "crash"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(
      /^countd: the MCP server "notes" offers no tool "crash" \(offered: echo, env, .*; include_tools and exclude_tools decide which are\)\n$/,
    );
    const bad = await countd(dir, ["mcp", "call", "notes", "echo", "{text: hello}"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("not valid JSON");
  });
});

describe("MCP tool names in job files", () => {
  it("are warned about until the server was listed, then checked by validate like any tool name", async () => {
    const dir = await mcpFolder({ notes: fixtureServer(), common });
    await writeFile(join(dir, "jobs", "digest.yaml"), "prompt: x\ntools: [read_file, mcp_notes_echo, mcp_notes_*, mcp_notes_serch]\n");
    const before = await countd(dir, ["validate"]);
    expect(before.code).toBe(0);
    const unchecked = (index: number, col: number, name: string) =>
      `jobs/digest.yaml:2:${col}: warning: tools[${index}]: "${name}" is not checked: the tools of the MCP server "notes" have not been listed (countd mcp lists them)\n`;
    expect(before.stderr).toBe(unchecked(1, 20, "mcp_notes_echo") + unchecked(2, 36, "mcp_notes_*") + unchecked(3, 49, "mcp_notes_serch"));
    expect((await countd(dir, ["mcp"])).code).toBe(0);
    const after = await countd(dir, ["validate"]);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(
      /^jobs\/digest\.yaml:2:49: tools\[3\]: unknown tool "mcp_notes_serch" \(known: read_file, .*, mcp_notes_echo, mcp_notes_env, /,
    );
  });
});

describe("countd start with MCP servers", () => {
  const mock = useAimock();

  it("runs a job through an MCP tool, refuses a job naming a tool its listed server lacks, and stops the servers with itself", async () => {
    const pids = join(await mkdtemp(join(tmpdir(), "countd-mcp-pids-")), "pids");
    const dir = await mcpFolder({ notes: fixtureServer([], { env: { PID_FILE: pids } }), common }, "runner:\n  shutdown_grace: 1s\n");
    await writeFile(join(dir, "jobs", "lookup.yaml"), 'every: 1h\ncatch_up: 0s\nprompt: "look up the notes"\ntools: ["mcp_notes_*"]\n');
    await writeFile(join(dir, "jobs", "typo.yaml"), 'every: 1h\nprompt: "x"\ntools: [mcp_notes_ech]\n');
    mock.addFixture({
      match: { userMessage: "look up the notes", hasToolResult: false },
      response: { toolCalls: [{ name: "mcp_notes_echo", arguments: '{"text":"daemon"}' }] },
    });
    mock.addFixture({ match: { userMessage: "look up the notes", hasToolResult: true }, response: { content: "the notes say hi" } });

    const daemon = spawnDaemon(dir, llmEnv(mock.url));
    try {
      await vi.waitFor(() => expect(daemon.output()).toContain('"countd started"'), { timeout: 60_000, interval: 100 });
      expect(logLines(daemon.output(), "MCP server connected")).toEqual([
        expect.objectContaining({ component: "mcp", server: "notes", tools: 8 }),
      ]);
      expect(daemon.output()).toContain('jobs/typo.yaml:3:9: tools[0]: unknown tool \\"mcp_notes_ech\\"');
      // `countd run` hands the run to the daemon, whose MCP connection serves it.
      const run = await countd(dir, ["run", "lookup"], llmEnv(mock.url));
      expect(run).toMatchObject({ code: 0, stdout: "the notes say hi\n" });
      expect(run.stderr).toMatch(/\[tool\] mcp_notes_echo \{"text":"daemon"\} ok \d+ms/);
    } finally {
      daemon.child.kill("SIGTERM");
    }
    expect(await daemon.exited).toBe(0);
    const [pid] = (await readFile(pids, "utf8")).split("\n").filter(Boolean).map(Number);
    expect(() => process.kill(pid!, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
  });
});
