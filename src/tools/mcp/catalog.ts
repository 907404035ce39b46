import { fingerprint, type Listing } from "../../store/mcp-listing.js";
import type { McpServerSettings } from "./config.js";

/** What is known of the MCP servers' tool names where a job's `tools:` is checked. */
export interface McpCatalog {
  /** The offered tools of every server whose tools are known. */
  tools: readonly string[];
  /** The servers whose tools are not known: a name that may be theirs is warned about, not refused. */
  unlisted: readonly string[];
}

/** From the listings on record (`<state_dir>/mcp-tools.json`), for the commands that start no server. */
export function catalogFromListings(servers: readonly McpServerSettings[], listings: Record<string, Listing>): McpCatalog {
  const current = servers
    .map((server) => ({ server, listing: listings[server.name] }))
    .map(({ server, listing }) => ({
      name: server.name,
      tools: listing && listing.fingerprint === fingerprint(server) ? listing.tools : undefined,
    }));
  return {
    tools: current.flatMap((server) => server.tools ?? []),
    unlisted: current.filter((server) => server.tools === undefined).map((server) => server.name),
  };
}
