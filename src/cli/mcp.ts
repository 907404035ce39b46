import { mkdir } from "node:fs/promises";
import { Redactor } from "../audit/redact.js";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { silentLogger } from "../log.js";
import { errorText, excerpt } from "../text.js";
import { McpManager, type McpServerReport } from "../tools/mcp/manager.js";
import { resultText } from "../tools/mcp/result.js";
import { EXIT } from "./output.js";

/*
 * `countd mcp` and `countd mcp call` connect to the servers of countd.yaml themselves, beside a
 * running daemon or without one (a stdio server is started once more, here), and stop them
 * before they return. What the daemon's own connections are doing, its log says.
 */

/** What the description column shows of a tool's description: its first line, cut. */
const DESCRIPTION_CHARS = 72;

/** `countd mcp`: each server's state (connected, or failed and why) and the tools it offers; exit 1 when one failed. */
export async function listMcp(opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: ["mcp"] });
  if (config.mcpServers.length === 0) {
    process.stdout.write(`no MCP servers are configured (mcp_servers: in ${config.file ?? "countd.yaml"})\n`);
    return EXIT.ok;
  }
  const { reports, redactor } = await withServers(
    config,
    config.mcpServers.map((server) => server.name),
    async (manager, redactor) => ({ reports: manager.reports(), redactor }),
  );
  process.stdout.write(redactor.redact(reports.map(describe).join("\n")));
  return reports.every((report) => report.state.status === "connected") ? EXIT.ok : EXIT.failure;
}

/** `countd mcp call <server> <tool> [json]`: one call of the server's tool (as the server names it), its result on stdout. */
export async function callMcpTool(server: string, tool: string, args: Record<string, unknown>, opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: ["mcp"] });
  if (!config.mcpServers.some((settings) => settings.name === server)) {
    const known = config.mcpServers.map((settings) => settings.name).join(", ") || "none";
    throw new Error(`no MCP server named "${server}" in ${config.file ?? "countd.yaml"} (servers: ${known})`);
  }
  return withServers(config, [server], async (manager, redactor) => {
    const [report] = manager.reports();
    if (report!.state.status === "failed") throw new Error(`the MCP server "${server}" could not be connected: ${report!.state.reason}`);
    if (!report!.tools?.some((offered) => offered.tool === tool)) {
      const offered = report!.tools?.map((offered) => offered.tool).join(", ") || "none";
      throw new Error(
        `the MCP server "${server}" offers no tool "${tool}" (offered: ${offered}; include_tools and exclude_tools decide which are)`,
      );
    }
    const cancel = new AbortController();
    const onSigint = () => cancel.abort();
    process.once("SIGINT", onSigint);
    try {
      const result = await manager.connection(server)!.call(tool, args, cancel.signal);
      const text = redactor.redact(resultText(result));
      (result.isError ? process.stderr : process.stdout).write(`${text}\n`);
      return result.isError ? EXIT.failure : EXIT.ok;
    } finally {
      process.off("SIGINT", onSigint);
    }
  });
}

/**
 * Connects the named servers (each within its connect_timeout), hands them over, and stops them
 * after. A server's failure (its stderr, an HTTP error body) may quote the secret it was given:
 * what this command prints, and the error it ends with, are redacted of every configured secret.
 */
async function withServers<T>(
  config: Config,
  names: readonly string[],
  use: (manager: McpManager, redactor: Redactor) => Promise<T>,
): Promise<T> {
  // The listing is recorded for countd validate, which checks job files' MCP tool names against it.
  await mkdir(config.paths.state, { recursive: true });
  const redactor = new Redactor(config.secrets);
  const manager = new McpManager(
    config.mcpServers.filter((server) => names.includes(server.name)),
    { env: process.env, workspace: config.paths.workspace, log: silentLogger, stateDir: config.paths.state },
  );
  try {
    await manager.start();
    return await use(manager, redactor);
  } catch (err) {
    const text = errorText(err);
    const safe = redactor.redact(text);
    if (safe === text) throw err;
    throw new Error(safe);
  } finally {
    await manager.close();
  }
}

function describe(report: McpServerReport): string {
  const { state } = report;
  const status =
    state.status === "connected"
      ? `connected, ${report.tools!.length === 1 ? "1 tool" : `${report.tools!.length} tools`}${report.filteredOut > 0 ? ` (${report.filteredOut} left out by include_tools/exclude_tools)` : ""}`
      : state.status === "failed"
        ? `failed: ${state.reason}`
        : "connecting";
  const width = Math.max(0, ...(report.tools ?? []).map((tool) => tool.name.length));
  const tools = (report.tools ?? []).map((tool) => {
    const description = excerpt((tool.description ?? "").split("\n")[0]!.trim(), DESCRIPTION_CHARS);
    return `  ${tool.name.padEnd(width)}  ${tool.tool === tool.name.slice(-tool.tool.length) ? "" : `(${tool.tool}) `}${description}`.trimEnd();
  });
  const collisions = report.collisions.map(
    (collision) => `  refused, their names collide as ${collision.name}: ${collision.tools.join(", ")}`,
  );
  return [`${report.name}  ${status}`, ...tools, ...collisions].join("\n") + "\n";
}
