import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { countdToolName, separateCollisions, toolFilter } from "../../src/tools/mcp/names.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-mcp-config-"));
});

async function load(yaml: string, env: Record<string, string> = {}, needs?: NonNullable<Parameters<typeof loadConfig>[0]>["needs"]) {
  await writeFile(join(dir, "countd.yaml"), yaml);
  return loadConfig({ cwd: dir, env, ...(needs ? { needs } : {}) });
}

const problems = (yaml: string) =>
  load(yaml).then(
    () => [],
    (err: Error) => err.message.split("\n"),
  );

describe("mcp_servers in countd.yaml", () => {
  it("reads stdio and HTTP servers with common: settings and defaults, a stdio server's cwd taken from the file's folder", async () => {
    const config = await load(`mcp_servers:
  notes:
    command: node
    args: [servers/notes.js, 3]
    env: { NOTES_DIR: /srv/notes }
    include_tools: ["search*"]
    call_timeout: 2m
  tracker:
    url: https://mcp.example.com/mcp
  common:
    exclude_tools: ["delete_*"]
    connect_timeout: 5s
`);
    expect(config.mcpServers).toEqual([
      {
        name: "notes",
        transport: { kind: "stdio", command: "node", args: ["servers/notes.js", "3"], env: { NOTES_DIR: "/srv/notes" }, cwd: dir },
        includeTools: ["search*"],
        excludeTools: ["delete_*"],
        connectTimeoutMs: 5_000,
        callTimeoutMs: 120_000,
      },
      {
        name: "tracker",
        transport: { kind: "http", url: "https://mcp.example.com/mcp", headers: {} },
        includeTools: ["*"],
        excludeTools: ["delete_*"],
        connectTimeoutMs: 5_000,
        callTimeoutMs: 60_000,
      },
    ]);
  });

  it("names each mistake at file:line:col: both command and url, neither, a key that belongs to the other kind, an unknown key, a bad name", async () => {
    expect(
      await problems(`mcp_servers:
  both:
    command: node
    url: https://mcp.example.com/mcp
  neither:
    include_tools: ["*"]
  http:
    url: https://mcp.example.com/mcp
    env: { A: b }
  notes:
    comand: node
  "my notes":
    command: node
  common:
    call_timeout: soon
`),
    ).toEqual([
      "countd.yaml:4:10: mcp_servers.both.url: give either command (a program countd starts) or url (a streamable HTTP endpoint), not both",
      "countd.yaml:6:5: mcp_servers.neither: needs command (a program countd starts, talking over stdio) or url (a streamable HTTP endpoint)",
      "countd.yaml:9:10: mcp_servers.http.env: applies to command servers only",
      'countd.yaml:11:5: mcp_servers.notes.comand: unknown key (did you mean "command"?)',
      "countd.yaml:11:5: mcp_servers.notes: needs command (a program countd starts, talking over stdio) or url (a streamable HTTP endpoint)",
      'countd.yaml:13:5: mcp_servers.my notes: server name "my notes": use at most 32 letters, digits, "_" and "-" (it is part of every tool name, mcp_<server>_<tool>)',
      'countd.yaml:15:19: mcp_servers.common.call_timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
    ]);
  });

  it("makes header and env values filled from ${VAR}, and those under secret names, secrets; commands that start no server need no variable", async () => {
    const yaml = `mcp_servers:
  tracker:
    url: https://mcp.example.com/mcp
    headers: { Authorization: "Bearer \${TRACKER_TOKEN}", Accept: application/json }
  notes:
    command: node
    env: { NOTES_DIR: /srv/notes, NOTES_API_KEY: literal-key-123, REGION: "\${NOTES_REGION}" }
`;
    const config = await load(yaml, { TRACKER_TOKEN: "tok-0123456789", NOTES_REGION: "eu-north-1" });
    expect(config.secrets).toEqual(expect.arrayContaining(["Bearer tok-0123456789", "tok-0123456789", "literal-key-123", "eu-north-1"]));
    expect(config.secrets).not.toContain("application/json");
    expect(config.secrets).not.toContain("/srv/notes");
    // validate, jobs, history: the section is still checked, its variables not needed.
    const offline = await load(yaml, {}, []);
    expect(offline.mcpServers.map((server) => server.name)).toEqual(["tracker", "notes"]);
    await expect(load(yaml, { NOTES_REGION: "eu-north-1" })).rejects.toThrow(
      "countd.yaml:4:39: mcp_servers.tracker.headers.Authorization: environment variable TRACKER_TOKEN is not set",
    );
  });
});

describe("MCP tool names", () => {
  it("are mcp_<server>_<tool> in the characters providers take, at most 64 long", () => {
    expect(countdToolName("notes", "search")).toBe("mcp_notes_search");
    expect(countdToolName("gh", "repos/list.all issues")).toBe("mcp_gh_repos_list_all_issues");
    expect(countdToolName("notes", "x".repeat(80))).toBe(`mcp_notes_${"x".repeat(54)}`);
  });

  it("are taken by include and exclude globs over the server's own names, * crossing /", () => {
    const offered = toolFilter(["search*", "repos/*"], ["*_admin"]);
    expect(["search", "search_admin", "repos/list/all", "delete"].filter(offered)).toEqual(["search", "repos/list/all"]);
  });

  it("that collide are set apart with both original names", () => {
    const tools = ["search.notes", "search_notes", "list"].map((tool) => ({
      server: "notes",
      tool,
      name: countdToolName("notes", tool),
      value: tool,
    }));
    const { unique, collisions } = separateCollisions(tools);
    expect(unique.map((tool) => tool.name)).toEqual(["mcp_notes_list"]);
    expect(collisions.map((group) => group.map((tool) => tool.tool))).toEqual([["search.notes", "search_notes"]]);
  });
});
