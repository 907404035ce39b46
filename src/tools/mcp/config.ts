import * as z from "zod";
import { describeValue, duration, envName, expected, httpURL, text, unlessEmpty } from "../../config/fields.js";

/**
 * countd.yaml's `mcp_servers:`: one entry per server, and `common:` for what every server shares.
 * Read into McpServerSettings, with defaults and `common:` applied; load.ts resolves `cwd` and
 * adds the secret values of `env:` and `headers:` to the redactor's.
 */

/**
 * Letters, digits, `_` and `-`, at most 32: the name is part of every tool name
 * (`mcp_<server>_<tool>`), which providers limit to 64 such characters.
 */
export const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;
const COMMON = "common";

export const MCP_DEFAULTS = { includeTools: ["*"], excludeTools: [] as string[], connectTimeoutMs: 10_000, callTimeoutMs: 60_000 };

/** `${VAR}` yields strings, YAML numbers and switches (`PORT: 8080`); all of them are sent as text. */
const value = () => z.union([z.string(), z.number(), z.boolean()], expected("a string")).transform(String);

const globs = () => z.array(text(), expected("a list of tool names or globs")).optional();

const shared = {
  include_tools: globs(),
  exclude_tools: globs(),
  connect_timeout: duration({ allowZero: false }).optional(),
  call_timeout: duration({ allowZero: false }).optional(),
};

const serverSchema = z
  .strictObject(
    {
      command: unlessEmpty(text()),
      args: z.array(value(), expected("a list of arguments")).optional(),
      env: z.record(envName(), value(), expected("a mapping of variable names to values")).optional(),
      cwd: unlessEmpty(text()),
      url: unlessEmpty(httpURL),
      headers: z.record(text(), value(), expected("a mapping of header names to values")).optional(),
      ...shared,
    },
    expected("a mapping"),
  )
  .superRefine((server, ctx) => {
    if (server.command !== undefined && server.url !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["url"],
        message: "give either command (a program countd starts) or url (a streamable HTTP endpoint), not both",
      });
    } else if (server.command === undefined && server.url === undefined) {
      ctx.addIssue({
        code: "custom",
        path: [],
        message: "needs command (a program countd starts, talking over stdio) or url (a streamable HTTP endpoint)",
      });
    }
    const misplaced =
      server.url !== undefined ? (["args", "env", "cwd"] as const) : server.command !== undefined ? (["headers"] as const) : [];
    for (const key of misplaced) {
      if (server[key] !== undefined) {
        ctx.addIssue({ code: "custom", path: [key], message: `applies to ${key === "headers" ? "url" : "command"} servers only` });
      }
    }
  });

type WrittenServer = z.output<typeof serverSchema>;

export type McpTransportSettings =
  | { kind: "stdio"; command: string; args: string[]; env: Record<string, string>; cwd?: string }
  | { kind: "http"; url: string; headers: Record<string, string> };

export interface McpServerSettings {
  name: string;
  transport: McpTransportSettings;
  /** Globs over the server's own tool names: a tool is offered when it matches one include and no exclude. */
  includeTools: string[];
  excludeTools: string[];
  /** Starting the server, the MCP handshake and listing its tools. */
  connectTimeoutMs: number;
  /** One tool call, passed to the SDK as the request's timeout. */
  callTimeoutMs: number;
}

export const mcpServersSchema = z
  .preprocess(
    (v) => v ?? {},
    z
      .object({ [COMMON]: z.preprocess((v) => v ?? {}, z.strictObject(shared, expected("a mapping"))) }, expected("a mapping"))
      .catchall(serverSchema),
  )
  .superRefine(
    (servers, ctx) => {
      for (const name of Object.keys(servers)) {
        if (name !== COMMON && !SERVER_NAME.test(name)) {
          ctx.addIssue({
            code: "custom",
            path: [name],
            message: `server name ${describeValue(name)}: use at most 32 letters, digits, "_" and "-" (it is part of every tool name, mcp_<server>_<tool>)`,
          });
        }
      }
    },
    // Also when a server's settings have problems: the names are checked all the same.
    { when: ({ value }) => typeof value === "object" && value !== null },
  )
  .transform(({ [COMMON]: common, ...servers }): McpServerSettings[] =>
    Object.entries(servers as Record<string, WrittenServer>).map(([name, server]) => ({
      name,
      transport:
        server.url !== undefined
          ? { kind: "http", url: server.url, headers: server.headers ?? {} }
          : {
              kind: "stdio",
              command: server.command!,
              args: server.args ?? [],
              env: server.env ?? {},
              ...(server.cwd ? { cwd: server.cwd } : {}),
            },
      includeTools: server.include_tools ?? common.include_tools ?? MCP_DEFAULTS.includeTools,
      excludeTools: server.exclude_tools ?? common.exclude_tools ?? MCP_DEFAULTS.excludeTools,
      connectTimeoutMs: server.connect_timeout ?? common.connect_timeout ?? MCP_DEFAULTS.connectTimeoutMs,
      callTimeoutMs: server.call_timeout ?? common.call_timeout ?? MCP_DEFAULTS.callTimeoutMs,
    })),
  );
