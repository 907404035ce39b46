import picomatch from "picomatch";

/*
 * How an MCP server's tools are named in countd: `mcp_<server>_<tool>`, with every character
 * outside `a-zA-Z0-9_-` written `_` and cut at 64, the strictest of the providers' rules
 * (OpenAI's and Anthropic's are both `^[a-zA-Z0-9_-]{1,64}$`).
 */

const MAX_NAME_LENGTH = 64;
const NOT_ALLOWED = /[^a-zA-Z0-9_-]/g;

/** What every tool of `server` is named with; a job's `mcp_notes_*` is this and a glob. */
export const toolPrefix = (server: string): string => `mcp_${server}_`;

export function countdToolName(server: string, tool: string): string {
  return `${toolPrefix(server)}${tool.replace(NOT_ALLOWED, "_")}`.slice(0, MAX_NAME_LENGTH);
}

/**
 * Whether the server's tool `tool` is offered: it matches an include glob and no exclude glob.
 * `*` also matches `/`, which tool names may hold.
 */
export function toolFilter(include: readonly string[], exclude: readonly string[]): (tool: string) => boolean {
  const options = { bash: true, dot: true };
  const included = picomatch([...include], options);
  const excluded = exclude.length > 0 ? picomatch([...exclude], options) : () => false;
  return (tool) => included(tool) && !excluded(tool);
}

export interface NamedTool<T> {
  server: string;
  /** As the server names it. */
  tool: string;
  /** As countd offers it. */
  name: string;
  value: T;
}

/**
 * The tools whose countd names are their own, and the groups whose names collide (two tools of
 * one server differing only in characters written `_`, or cut at 64 characters): those are
 * offered under neither name, since a call could reach the wrong one.
 */
export function separateCollisions<T>(tools: readonly NamedTool<T>[]): { unique: NamedTool<T>[]; collisions: NamedTool<T>[][] } {
  const byName = new Map<string, NamedTool<T>[]>();
  for (const tool of tools) byName.set(tool.name, [...(byName.get(tool.name) ?? []), tool]);
  const groups = [...byName.values()];
  return {
    unique: groups.filter((group) => group.length === 1).map((group) => group[0]!),
    collisions: groups.filter((group) => group.length > 1),
  };
}

/**
 * Whether a tool name or glob a job writes may stand for tools of `server`: it names the
 * server's prefix, or its text before the first glob character is a start of that prefix
 * (`mcp_*`, `mcp_notes_s*`).
 */
export function mayNameToolOf(pattern: string, server: string): boolean {
  const prefix = toolPrefix(server);
  const glob = pattern.search(/[*?[{(!]/);
  const literal = glob < 0 ? pattern : pattern.slice(0, glob);
  return literal.startsWith(prefix) || (glob >= 0 && prefix.startsWith(literal));
}
