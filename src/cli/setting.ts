import { loadConfig } from "../config/load.js";
import { jobContext } from "../jobs/context.js";
import { readListings } from "../store/mcp-listing.js";
import { catalogFromListings } from "../tools/mcp/catalog.js";

/**
 * Reading state needs no lock: these commands work beside a running daemon. They send nothing,
 * so they need no secret: no provider key, SMTP password or delivery variable is looked up.
 */
export async function setting(configFile: string | undefined) {
  const config = await loadConfig({ file: configFile, needs: [] });
  // MCP tool names are checked against the servers' lists as last recorded, without starting a server.
  const mcp = catalogFromListings(config.mcpServers, await readListings(config.paths.state));
  return { config, ctx: jobContext(config, null, () => mcp) };
}
