import { createHash } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import type { McpServerSettings } from "../tools/mcp/config.js";

/**
 * The tool names each MCP server offered when it was last listed (by the daemon, `countd run`,
 * `countd ask` or `countd mcp`), in `<state_dir>/mcp-tools.json`: `countd validate` and
 * `countd jobs` check job files against it without starting a server. Names only: no secret.
 */
const FILE = "mcp-tools.json";

export interface Listing {
  /** Of the settings that decide the names (fingerprint): a server configured otherwise since is not listed. */
  fingerprint: string;
  listedAt: string;
  tools: string[];
}

const listingShape = z.record(z.string(), z.object({ fingerprint: z.string(), listedAt: z.string(), tools: z.array(z.string()) }));

/** The listings on record; a missing or unreadable file is none (the names are then only warned about). */
export async function readListings(stateDir: string): Promise<Record<string, Listing>> {
  const text = await readFile(join(stateDir, FILE), "utf8").catch(() => "{}");
  try {
    const parsed = listingShape.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** Records these servers' listings beside the others on record; written whole (temporary file, rename). */
export async function recordListings(stateDir: string, listings: Record<string, Listing>): Promise<void> {
  const file = join(stateDir, FILE);
  const text = `${JSON.stringify({ ...(await readListings(stateDir)), ...listings }, null, 2)}\n`;
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, text);
  await rename(temp, file);
}

/** What the offered names depend on: where the server is and which of its tools are taken (no env or header values). */
export function fingerprint(settings: McpServerSettings): string {
  const { transport } = settings;
  const where = transport.kind === "http" ? [transport.url] : [transport.command, ...transport.args, transport.cwd];
  return createHash("sha256")
    .update(JSON.stringify([where, settings.includeTools, settings.excludeTools]))
    .digest("hex")
    .slice(0, 16);
}
