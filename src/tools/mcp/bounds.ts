import bytes from "bytes";

/**
 * What countd reads from an MCP server at most: a server is a separate program, maybe someone
 * else's, and nothing it sends may grow the daemon's memory or hold its event loop without bound.
 * docs/mcp.md ("Bounds") states each of these to operators.
 */

/** One message (a stdio line, an HTTP JSON body, one server-sent event): a 3 MB image fits in base64. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** Pages of one tool listing. */
export const MAX_LIST_PAGES = 20;

/** Tools offered from one server. */
export const MAX_TOOLS = 500;

/** A tool's description as the model reads it: every request of every run naming the tool carries it. */
export const MAX_DESCRIPTION_CHARS = 2_000;

/** Between the starts of two listings after `notifications/tools/list_changed`: a storm of them is one listing a second. */
export const RELIST_INTERVAL_MS = 1_000;

/** What a message over MAX_MESSAGE_BYTES fails with; its text is how the transports' errors are told apart. */
export const TOO_LARGE = `sent a message over ${bytes.format(MAX_MESSAGE_BYTES)}, more than countd reads`;

/** The SDK's stdio ReadBuffer says this of a line over its maxBufferSize. */
const STDIO_TOO_LARGE = "ReadBuffer exceeded maximum size";

/** Whether `err` (maybe wrapped in the SDK's text, as an SSE stream's is) is a message over the bound. */
export function isTooLarge(err: unknown): boolean {
  const text = err instanceof Error ? err.message : String(err);
  return text.includes(TOO_LARGE) || text.includes(STDIO_TOO_LARGE);
}
