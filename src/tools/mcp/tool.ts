import * as z from "zod";
import { defineTool } from "../registry.js";
import { FinalToolError, type Tool } from "../types.js";
import { frameUntrusted } from "../untrusted.js";
import type { ListedTool, McpConnection } from "./connection.js";
import { resultText } from "./result.js";

/** The server checks the arguments against its own schema; countd only makes sure they are an object. */
const anyArguments = z.record(z.string(), z.unknown());

/**
 * One of a server's tools as a countd tool named `name`: the server's description and JSON
 * Schema as they are, its results untrusted and labelled with the server. A failed call (the
 * server's error result, a timeout, a lost connection) is final: the loop does not call again.
 */
export function mcpTool(connection: McpConnection, listed: ListedTool, name: string): Tool<typeof anyArguments> {
  const server = connection.name;
  return defineTool({
    name,
    description: listed.description ?? `The ${listed.name} tool of the MCP server "${server}".`,
    parameters: anyArguments,
    inputSchema: listed.inputSchema,
    untrusted: true,
    server,
    async execute(args, ctx) {
      const result = await connection.call(listed.name, args, ctx.signal);
      const text = resultText(result);
      if (result.isError)
        throw new FinalToolError(
          `the MCP server "${server}" reported an error:\n${frameUntrusted(`the MCP server "${server}" (tool ${name})`, text)}`,
        );
      return text;
    },
  });
}
