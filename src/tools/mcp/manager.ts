import type { Logger } from "../../log.js";
import { fingerprint, recordListings, type Listing } from "../../store/mcp-listing.js";
import { errorText } from "../../text.js";
import type { Tool } from "../types.js";
import type { McpCatalog } from "./catalog.js";
import type { McpServerSettings } from "./config.js";
import { McpConnection, type ListedTool, type ServerState } from "./connection.js";
import { countdToolName, mayNameToolOf, separateCollisions, toolFilter, type NamedTool } from "./names.js";
import { mcpTool } from "./tool.js";

export interface McpManagerOptions {
  /** Where a stdio server's allow-listed variables are read from. */
  env: NodeJS.ProcessEnv;
  workspace: string;
  log: Logger;
  /** Where each listing is recorded for `countd validate` (store/mcp-listing.ts); not recorded when absent. */
  stateDir?: string;
}

/** One server as `countd mcp` shows it. */
export interface McpServerReport {
  name: string;
  state: ServerState;
  /** Offered, as the server and as countd names them; undefined until the server was first listed. */
  tools?: Array<{ tool: string; name: string; description?: string }>;
  /** How many of its tools include_tools and exclude_tools leave out. */
  filteredOut: number;
  /** Tools offered under neither name, since their names collide. */
  collisions: Array<{ name: string; tools: string[] }>;
}

/**
 * Every configured MCP server: all connected at once, each reconnecting on its own, their tools
 * named, filtered and checked for collisions whenever a list changes.
 */
export class McpManager {
  private readonly connections: McpConnection[];
  private offered: NamedTool<Tool>[] = [];
  private collisions: NamedTool<Tool>[][] = [];
  private reportedCollisions = "";
  private recording: Promise<void> = Promise.resolve();
  private readonly log: Logger;

  constructor(
    servers: readonly McpServerSettings[],
    private readonly opts: McpManagerOptions,
  ) {
    this.log = opts.log.child({ component: "mcp" });
    this.connections = servers.map(
      (settings) => new McpConnection(settings, { env: opts.env, workspace: opts.workspace, log: opts.log, onTools: () => this.rebuild() }),
    );
  }

  /** Connects every server in parallel; resolves once each one's first attempt connected or failed. */
  async start(): Promise<void> {
    await Promise.all(this.connections.map((connection) => connection.start()));
  }

  /** The tools offered now (a server reconnecting keeps its last list; calls then fail clearly). */
  tools(): Tool[] {
    return this.offered.map((tool) => tool.value);
  }

  connection(server: string): McpConnection | undefined {
    return this.connections.find((connection) => connection.name === server);
  }

  catalog(): McpCatalog {
    return {
      tools: this.offered.map((tool) => tool.name),
      unlisted: this.connections.filter((connection) => connection.tools === undefined).map((connection) => connection.name),
    };
  }

  /**
   * Why a tool name or glob of a run stands for no tool when the reason is a server not listed
   * (never connected so far); undefined otherwise, when the name is simply unknown.
   */
  unlistedReason(pattern: string): string | undefined {
    const server = this.connections.find((connection) => connection.tools === undefined && mayNameToolOf(pattern, connection.name));
    if (!server) return undefined;
    const state = server.state.status === "failed" ? `could not be connected (${server.state.reason})` : "is still connecting";
    return `the tool ${pattern} is not offered: the MCP server "${server.name}" ${state}, so its tools are not known; countd keeps trying to connect it`;
  }

  reports(): McpServerReport[] {
    return this.connections.map((connection) => {
      const mine = (tool: NamedTool<Tool>) => tool.server === connection.name;
      const listed = connection.tools;
      const offered = this.offered.filter(mine);
      const collisions = this.collisions.filter((group) => group.some(mine));
      return {
        name: connection.name,
        state: connection.state,
        ...(listed ? { tools: offered.map(({ tool, name, value }) => ({ tool, name, description: value.description })) } : {}),
        filteredOut: listed ? listed.length - offered.length - collisions.reduce((sum, group) => sum + group.filter(mine).length, 0) : 0,
        collisions: collisions.map((group) => ({ name: group[0]!.name, tools: group.map(({ server, tool }) => `${server}/${tool}`) })),
      };
    });
  }

  /** Stops every server (stdio ones: stdin closed, then SIGTERM, then SIGKILL, 2 s apart). */
  async close(): Promise<void> {
    await Promise.all(this.connections.map((connection) => connection.close()));
    await this.recording;
  }

  private rebuild(): void {
    const named = this.connections.flatMap((connection) => {
      const offer = toolFilter(connection.settings.includeTools, connection.settings.excludeTools);
      return (connection.tools ?? [])
        .filter((listed) => offer(listed.name))
        .map((listed): NamedTool<Tool> => namedTool(connection, listed));
    });
    const { unique, collisions } = separateCollisions(named);
    this.offered = unique;
    this.collisions = collisions;
    const described = collisions.map((group) => ({ name: group[0]!.name, tools: group.map(({ server, tool }) => `${server}/${tool}`) }));
    if (JSON.stringify(described) !== this.reportedCollisions) {
      this.reportedCollisions = JSON.stringify(described);
      for (const collision of described) {
        this.log.error(
          collision,
          "MCP tools refused: their names collide once made valid tool names, so neither is offered (rename one on its server, or leave one out with exclude_tools)",
        );
      }
    }
    this.record();
  }

  private record(): void {
    const { stateDir } = this.opts;
    if (!stateDir) return;
    const listedAt = new Date().toISOString();
    const listings: Record<string, Listing> = {};
    for (const connection of this.connections) {
      if (connection.tools === undefined) continue;
      const tools = this.offered.filter((tool) => tool.server === connection.name).map((tool) => tool.name);
      listings[connection.name] = { fingerprint: fingerprint(connection.settings), listedAt, tools };
    }
    this.recording = this.recording
      .then(() => recordListings(stateDir, listings))
      .catch((err: unknown) =>
        this.log.warn({ error: errorText(err), dir: stateDir }, "could not record the MCP servers' tool lists for countd validate"),
      );
  }
}

function namedTool(connection: McpConnection, listed: ListedTool): NamedTool<Tool> {
  const name = countdToolName(connection.name, listed.name);
  return { server: connection.name, tool: listed.name, name, value: mcpTool(connection, listed, name) };
}
