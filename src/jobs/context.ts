import type { Config } from "../config/schema.js";
import { toolNames } from "../tools/names.js";
import type { McpCatalog } from "../tools/mcp/catalog.js";
import type { JobContext } from "./load.js";

/**
 * What job files are checked against, from the configuration alone: every command (start, run,
 * jobs, validate) builds it here, so a job one of them accepts is accepted by all. `env`: where
 * delivery variables are looked up; null for the commands that send nothing. `mcpTools`: the MCP
 * servers' tools as known to the caller (live, or as last recorded).
 */
export function jobContext(
  config: Config,
  env: NodeJS.ProcessEnv | null = process.env,
  mcpTools?: () => McpCatalog | undefined,
): JobContext {
  return {
    workspace: config.paths.workspace,
    defaultTimezone: config.timezone,
    knownTools: toolNames(config),
    // Without the servers' lists, every MCP tool name is only warned about.
    mcpTools: mcpTools ?? (() => ({ tools: [], unlisted: config.mcpServers.map((server) => server.name) })),
    env,
    jobEnv: config.jobEnv,
    secretNames: config.secretNames,
  };
}
