import { DEFAULT_INHERITED_ENV_VARS, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { childEnv } from "../child-env.js";
import { boundedFetch } from "./bounded-fetch.js";
import { MAX_MESSAGE_BYTES } from "./bounds.js";
import type { McpTransportSettings } from "./config.js";

/** Enough of a server's stderr to see why it failed, not a log of its own. */
const STDERR_TAIL_CHARS = 4_096;

export interface OpenedTransport {
  transport: Transport;
  /** The end of what a stdio server wrote to stderr so far; "" for HTTP. */
  stderrTail(): string;
}

/**
 * The SDK's transport for one connection attempt. A stdio server is started by the SDK, which on
 * close ends its stdin, then sends SIGTERM and SIGKILL 2 s apart while it lives on. Each message
 * is read up to MAX_MESSAGE_BYTES; an HTTP answer no longer than `maxRequestMs` (bounded-fetch.ts).
 */
export function openTransport(
  settings: McpTransportSettings,
  env: NodeJS.ProcessEnv,
  workspace: string,
  maxRequestMs: number,
): OpenedTransport {
  if (settings.kind === "http") {
    const transport = new StreamableHTTPClientTransport(new URL(settings.url), {
      requestInit: { headers: settings.headers },
      fetch: boundedFetch(maxRequestMs),
    });
    return { transport, stderrTail: () => "" };
  }
  const transport = new StdioClientTransport({
    command: settings.command,
    args: settings.args,
    env: serverEnv(env, workspace, settings.env),
    ...(settings.cwd ? { cwd: settings.cwd } : {}),
    // Piped, not inherited: the daemon's stdout and stderr carry its own log.
    stderr: "pipe",
    // The SDK's own bound on a line not yet ended (10 MB by default): past it, it reports an error and countd drops the connection.
    maxBufferSize: MAX_MESSAGE_BYTES,
  });
  let tail = "";
  // Read as it comes, or a chatty server would block once the pipe's buffer is full.
  transport.stderr?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
  });
  return { transport, stderrTail: () => tail };
}

/**
 * A stdio server's whole environment: the exec tool's allow-list (PATH, LANG, LC_ALL, TZ, HOME
 * set to the workspace) and the server's `env:`. The SDK would add HOME, LOGNAME, SHELL, TERM and
 * USER from countd's own environment to whatever it is given: those not set here are given as
 * undefined, which Node leaves out of the child's environment.
 */
export function serverEnv(source: NodeJS.ProcessEnv, workspace: string, configured: Record<string, string>): Record<string, string> {
  const env: Record<string, string | undefined> = { ...childEnv(source, workspace, []), ...configured };
  for (const name of DEFAULT_INHERITED_ENV_VARS) if (!(name in env)) env[name] = undefined;
  return env as Record<string, string>;
}
