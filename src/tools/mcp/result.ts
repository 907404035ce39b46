import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import bytes from "bytes";
import { excerpt } from "../../text.js";

/** As much as web_fetch returns: a server's result is bounded like every tool's. */
export const MCP_RESULT_MAX_CHARS = 50_000;

/**
 * A tool result as the text the LLM reads: text parts as they are, the structured result when
 * there is no content, and a line naming what cannot be passed on as text (images, audio,
 * binary resources: countd's tool results are text).
 */
export function resultText(result: CallToolResult, maxChars = MCP_RESULT_MAX_CHARS): string {
  const parts = result.content.map(partText);
  if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  const text = parts.join("\n") || "(no content)";
  return excerpt(text, maxChars, `\n[truncated: the result has ${text.length} characters; the first ${maxChars} are shown]`);
}

function partText(part: ContentBlock): string {
  switch (part.type) {
    case "text":
      return part.text;
    case "image":
    case "audio":
      return notShown(part.type, part.mimeType, part.data);
    case "resource_link":
      return `[resource link: ${part.uri}${part.name ? ` (${part.name})` : ""}]`;
    case "resource":
      return "text" in part.resource
        ? `[resource ${part.resource.uri}]\n${part.resource.text}`
        : notShown(`resource ${part.resource.uri}`, part.resource.mimeType, part.resource.blob);
  }
}

function notShown(what: string, mimeType: string | undefined, base64: string): string {
  return `[${what}: ${mimeType ?? "of no stated type"}, ${bytes.format(Buffer.byteLength(base64, "base64"))}; not shown, since tool results reach the model as text]`;
}
