import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../../log.js";
import { VERSION } from "../../package.js";
import { backoffMs, type RetryPolicy } from "../../providers/retry.js";
import { errorText } from "../../text.js";
import { FinalToolError } from "../types.js";
import { isTooLarge, RELIST_INTERVAL_MS, TOO_LARGE } from "./bounds.js";
import type { McpServerSettings } from "./config.js";
import { coalesced, listTools, type ListedTool, type Listing } from "./listing.js";
import { openTransport } from "./transport.js";

export type { ListedTool } from "./listing.js";

export type ServerState =
  { status: "connecting" } | { status: "connected"; since: Date } | { status: "failed"; reason: string; since: Date };

export interface ConnectionOptions {
  /** Where a stdio server's allow-listed variables are read from. */
  env: NodeJS.ProcessEnv;
  /** A stdio server's HOME, as a command's. */
  workspace: string;
  log: Logger;
  /** The server's tools were listed again: on connecting and on `notifications/tools/list_changed`. */
  onTools(): void;
}

/** Between attempts to connect: up to 1 s, doubling to a minute (jittered), for as long as countd runs. */
const RECONNECT: RetryPolicy = { attempts: Number.POSITIVE_INFINITY, baseDelayMs: 1_000, maxDelayMs: 60_000 };

/** How many of the stderr tail's last lines a failure's reason quotes; the log line has the whole tail. */
const REASON_STDERR_LINES = 3;

/**
 * A tool's `outputSchema` is not checked against its `structuredContent`: the SDK would compile
 * the server's schema with AJV and run it on the event loop, where a pattern that backtracks
 * held the daemon for seconds. The model reads the result as untrusted text either way.
 */
const UNVALIDATED: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

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
  /** Why each closed client was given up, for the calls it failed. */
  private readonly dropReasons = new WeakMap<Client, string>();
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
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: this.settings.callTimeoutMs,
        signal,
      })) as CallToolResult;
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
    this.connecting = this.connectUntilClosed(firstAttemptDone).finally(() => {
      this.connecting = undefined;
      firstAttemptDone?.();
    });
  }

  /** Attempts until one connects or close() is called, waiting RECONNECT's backoff between them. */
  private async connectUntilClosed(firstAttemptDone?: () => void): Promise<void> {
    const closing = this.closing.signal;
    for (let attempt = 1; !closing.aborted; attempt++) {
      try {
        return await this.connectOnce();
      } catch (err) {
        if (closing.aborted) return;
        const reason = errorText(err);
        this.state = { status: "failed", reason, since: new Date() };
        this.log.error(
          { attempt, error: reason, stderr: this.stderrTail() || undefined },
          "MCP server could not be connected; trying again with backoff",
        );
        firstAttemptDone?.();
      }
      await sleep(backoffMs(RECONNECT, attempt), undefined, { signal: closing }).catch(() => {});
    }
  }

  /** One attempt: start or reach the server, the handshake and the tool list, within connect_timeout. */
  private async connectOnce(): Promise<void> {
    const { connectTimeoutMs, callTimeoutMs } = this.settings;
    const { transport, stderrTail } = openTransport(
      this.settings.transport,
      this.opts.env,
      this.opts.workspace,
      Math.max(connectTimeoutMs, callTimeoutMs),
    );
    this.stderrTail = stderrTail;
    const client = new Client({ name: "countd", version: VERSION }, { jsonSchemaValidator: UNVALIDATED });
    // Handlers must never throw: the SDK calls them from its own callbacks, where a throw would be uncaught.
    client.onerror = (err) => this.transportError(client, err);
    const relister = coalesced(() => this.relist(client), RELIST_INTERVAL_MS);
    const closed = new Promise<void>((resolve) => {
      client.onclose = () => {
        relister.stop();
        resolve();
        this.dropped(client, "the connection was closed (the server exited or ended its session)");
      };
    });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => relister.request());
    const timeoutMs = connectTimeoutMs;
    const deadline = AbortSignal.any([this.closing.signal, AbortSignal.timeout(timeoutMs)]);
    try {
      await client.connect(transport, { timeout: timeoutMs, signal: deadline });
      this.tools = this.listed(await listTools(client, timeoutMs, deadline));
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

  /** After `notifications/tools/list_changed`: one listing at a time, a storm of them coalesced (listing.ts). */
  private async relist(client: Client): Promise<void> {
    const timeoutMs = this.settings.connectTimeoutMs;
    try {
      const listing = await listTools(client, timeoutMs, AbortSignal.any([this.closing.signal, AbortSignal.timeout(timeoutMs)]));
      if (this.client !== client) return;
      const before = names(this.tools);
      this.tools = this.listed(listing);
      const changed = names(this.tools) !== before;
      this.log[changed ? "info" : "debug"](
        { tools: this.tools.length },
        changed ? "MCP server's tools changed; listed again" : "MCP server said its tools changed; listed again, the same",
      );
      this.opts.onTools();
    } catch (err) {
      this.log.warn({ error: errorText(err) }, "MCP server said its tools changed, but listing them failed; the previous list stays");
    }
  }

  private listed({ tools, cut }: Listing): ListedTool[] {
    if (cut) this.log.warn({ tools: tools.length }, `MCP server's tool list cut short: ${cut}`);
    return tools;
  }

  private transportError(client: Client, err: Error): void {
    // A broken response stream or a session the server no longer knows: calls on it cannot complete.
    const lost = err.message.startsWith("SSE stream disconnected") || (err instanceof StreamableHTTPError && err.code === 404);
    // countd stopped reading it: what follows on a stdio pipe would be the rest of that message.
    if (isTooLarge(err)) this.dropped(client, `the server ${TOO_LARGE}`);
    else if (lost) this.dropped(client, `the connection was lost (${err.message})`);
    else this.log.debug({ error: err.message }, "MCP transport error");
  }

  /** The current connection is gone: calls in flight fail (the SDK rejects them) and countd reconnects. */
  private dropped(client: Client, why: string): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.dropReasons.set(client, why);
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
    if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed)
      return new FinalToolError(`${server} refused the call: ${err.message}`);
    // Closed, or a transport failure (the server unreachable, its session gone, a message too large): this connection is done for.
    this.dropped(client, isTooLarge(err) ? `the server ${TOO_LARGE}` : `the connection was lost (${errorText(err)})`);
    const why = this.dropReasons.get(client) ?? errorText(err);
    return new FinalToolError(
      `the connection to ${server} was lost during the call (${why}); whether the call acted is unknown, so it is not retried; countd is reconnecting the server`,
    );
  }

  private withStderr(reason: string): string {
    const lines = this.stderrTail().trim().split("\n").filter(Boolean).slice(-REASON_STDERR_LINES);
    return lines.length > 0 ? `${reason}; its stderr ends: ${lines.join(" | ")}` : reason;
  }
}

const names = (tools: ListedTool[] | undefined): string => JSON.stringify(tools?.map((tool) => [tool.name, tool.description]));

function isTimeout(err: unknown): boolean {
  return (err instanceof McpError && err.code === ErrorCode.RequestTimeout) || (err instanceof DOMException && err.name === "TimeoutError");
}

/** `1.5s`, `60s`: as precise as the setting (ms() would round 1500 to "2s"). */
const seconds = (milliseconds: number): string => `${milliseconds / 1000}s`;
