import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import pRetry from "p-retry";
import type { Logger } from "../../log.js";
import { VERSION } from "../../package.js";
import { errorText } from "../../text.js";
import { FinalToolError } from "../types.js";
import type { McpServerSettings } from "./config.js";
import { openTransport } from "./transport.js";

export type ServerState =
  | { status: "connecting" }
  | { status: "connected"; since: Date }
  | { status: "failed"; reason: string; since: Date };

export type ListedTool = Pick<McpTool, "name" | "description" | "inputSchema">;

export interface ConnectionOptions {
  /** Where a stdio server's allow-listed variables are read from. */
  env: NodeJS.ProcessEnv;
  /** A stdio server's HOME, as a command's. */
  workspace: string;
  log: Logger;
  /** The server's tools were listed again: on connecting and on `notifications/tools/list_changed`. */
  onTools(): void;
}

/** Between attempts to connect: doubling from 1 s (with jitter) up to a minute, for as long as countd runs. */
const RECONNECT = { retries: Number.POSITIVE_INFINITY, factor: 2, minTimeout: 1_000, maxTimeout: 60_000, randomize: true } as const;

/** How many of the stderr tail's last lines a failure's reason quotes; the log line has the whole tail. */
const REASON_STDERR_LINES = 3;

/**
 * One MCP server: connected at start, reconnected with backoff whenever it fails or drops (a stdio
 * server is started again), its tool list kept current. Nothing the server does throws out of
 * here but a tool call's own failure, as a FinalToolError: its outcome is unknown or the server
 * said no, and calling again would not help or could act twice.
 */
export class McpConnection {
  state: ServerState = { status: "connecting" };
  /** The tools as last listed, kept while the server reconnects; undefined until it was first listed. */
  tools: ListedTool[] | undefined;
  private client: Client | undefined;
  private stderrTail: () => string = () => "";
  private readonly closing = new AbortController();
  private connecting: Promise<void> | undefined;
  /** Servers of failed attempts on their way out. */
  private readonly stopping = new Set<Promise<void>>();
  private readonly log: Logger;

  constructor(
    readonly settings: McpServerSettings,
    private readonly opts: ConnectionOptions,
  ) {
    this.log = opts.log.child({ component: "mcp", server: settings.name });
  }

  get name(): string {
    return this.settings.name;
  }

  /** Starts connecting; resolves once the first attempt connected or failed (then it keeps trying). */
  start(): Promise<void> {
    return new Promise((firstAttemptDone) => this.connect(firstAttemptDone));
  }

  /** Calls one of the server's tools, bounded by call_timeout and aborted with `signal`. */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
    const client = this.client;
    if (!client) {
      const why = this.state.status === "failed" ? `: ${this.state.reason}` : " yet";
      throw new FinalToolError(`the MCP server "${this.name}" is not connected${why}; countd keeps trying to connect it`);
    }
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, { timeout: this.settings.callTimeoutMs, signal })) as CallToolResult;
    } catch (err) {
      throw this.callFailure(client, err, signal);
    }
  }

  /** Stops reconnecting and closes the connection (a stdio server: stdin closed, then SIGTERM, then SIGKILL). */
  async close(): Promise<void> {
    this.closing.abort();
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => {});
    await Promise.all(this.stopping);
  }

  private connect(firstAttemptDone?: () => void): void {
    if (this.connecting || this.closing.signal.aborted) return;
    this.connecting = pRetry(() => this.connectOnce(), {
      ...RECONNECT,
      signal: this.closing.signal,
      onFailedAttempt: ({ error, attemptNumber }) => {
        if (this.closing.signal.aborted) return;
        this.state = { status: "failed", reason: error.message, since: new Date() };
        this.log.error({ attempt: attemptNumber, error: error.message, stderr: this.stderrTail() || undefined }, "MCP server could not be connected; trying again with backoff");
        firstAttemptDone?.();
      },
    })
      // Rejected only when close() stopped it.
      .catch(() => {})
      .finally(() => {
        this.connecting = undefined;
        firstAttemptDone?.();
      });
  }

  /** One attempt: start or reach the server, the handshake and the tool list, within connect_timeout. */
  private async connectOnce(): Promise<void> {
    const { transport, stderrTail } = openTransport(this.settings.transport, this.opts.env, this.opts.workspace);
    this.stderrTail = stderrTail;
    const client = new Client({ name: "countd", version: VERSION });
    // Handlers must never throw: the SDK calls them from its own callbacks, where a throw would be uncaught.
    client.onerror = (err) => this.transportError(client, err);
    const closed = new Promise<void>((resolve) => {
      client.onclose = () => {
        resolve();
        this.dropped(client, "the connection was closed (the server exited or ended its session)");
      };
    });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.relist(client));
    const timeoutMs = this.settings.connectTimeoutMs;
    const deadline = AbortSignal.any([this.closing.signal, AbortSignal.timeout(timeoutMs)]);
    try {
      await client.connect(transport, { timeout: timeoutMs, signal: deadline });
      this.tools = await listTools(client, { timeout: timeoutMs, signal: deadline });
    } catch (err) {
      await client.close().catch(() => {});
      // On a failed handshake the SDK stops a stdio server in the background: close() waits for its end.
      this.stopping.add(closed);
      void closed.then(() => this.stopping.delete(closed));
      const timedOut = deadline.aborted && !this.closing.signal.aborted;
      const reason = timedOut || isTimeout(err) ? `no answer within connect_timeout (${seconds(timeoutMs)})` : errorText(err);
      throw new Error(this.withStderr(reason));
    }
    this.client = client;
    this.state = { status: "connected", since: new Date() };
    this.log.info({ tools: this.tools.length }, "MCP server connected");
    this.opts.onTools();
  }

  private relist(client: Client): void {
    listTools(client, { timeout: this.settings.connectTimeoutMs }).then(
      (tools) => {
        if (this.client !== client) return;
        this.tools = tools;
        this.log.info({ tools: tools.length }, "MCP server's tools changed; listed again");
        this.opts.onTools();
      },
      (err: unknown) => this.log.warn({ error: errorText(err) }, "MCP server said its tools changed, but listing them failed; the previous list stays"),
    );
  }

  private transportError(client: Client, err: Error): void {
    // A broken response stream or a session the server no longer knows: calls on it cannot complete.
    const lost = err.message.startsWith("SSE stream disconnected") || (err instanceof StreamableHTTPError && err.code === 404);
    if (lost) this.dropped(client, `the connection was lost (${err.message})`);
    else this.log.debug({ error: err.message }, "MCP transport error");
  }

  /** The current connection is gone: calls in flight fail (the SDK rejects them) and countd reconnects. */
  private dropped(client: Client, why: string): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.state = { status: "failed", reason: this.withStderr(why), since: new Date() };
    this.log.warn({ reason: why, stderr: this.stderrTail() || undefined }, "MCP server connection lost; reconnecting");
    void client.close().catch(() => {});
    this.connect();
  }

  private callFailure(client: Client, err: unknown, signal: AbortSignal): FinalToolError {
    const server = `the MCP server "${this.name}"`;
    if (signal.aborted) return new FinalToolError("cancelled: the run was cancelled during the call");
    if (isTimeout(err)) {
      return new FinalToolError(
        `${server} did not answer within call_timeout (${seconds(this.settings.callTimeoutMs)}): the call was cancelled, and is not retried since it may have acted`,
      );
    }
    if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed) return new FinalToolError(`${server} refused the call: ${err.message}`);
    // Closed, or a transport failure (the server unreachable, its session gone): this connection is done for.
    this.dropped(client, `the connection was lost (${errorText(err)})`);
    return new FinalToolError(
      `the connection to ${server} was lost during the call (${errorText(err)}); whether the call acted is unknown, so it is not retried; countd is reconnecting the server`,
    );
  }

  private withStderr(reason: string): string {
    const lines = this.stderrTail().trim().split("\n").filter(Boolean).slice(-REASON_STDERR_LINES);
    return lines.length > 0 ? `${reason}; its stderr ends: ${lines.join(" | ")}` : reason;
  }
}

/** Every page of the server's tool list. */
async function listTools(client: Client, options: { timeout: number; signal?: AbortSignal }): Promise<ListedTool[]> {
  const tools: ListedTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor }, options);
    tools.push(...page.tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

function isTimeout(err: unknown): boolean {
  return (err instanceof McpError && err.code === ErrorCode.RequestTimeout) || (err instanceof DOMException && err.name === "TimeoutError");
}

/** `1.5s`, `60s`: as precise as the setting (ms() would round 1500 to "2s"). */
const seconds = (milliseconds: number): string => `${milliseconds / 1000}s`;
