import type { ContentBlockParam, ImageBlockParam, MessageParam, TextBlockParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { LLMError } from "./errors.js";
import type { ChatMessage, ContentPart, ToolDefinition } from "./types.js";

export interface AnthropicConversation {
  system: TextBlockParam[];
  messages: MessageParam[];
}

const IMAGE_MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"] as const;
type ImageMediaType = (typeof IMAGE_MEDIA_TYPES)[number];

/**
 * Converts countd's OpenAI-like history into Anthropic's form: system messages become the
 * top-level `system` blocks, tool results travel inside user turns, and adjacent turns of the same
 * role are merged because Anthropic requires user and assistant turns to alternate.
 */
export function toAnthropicConversation(history: ChatMessage[]): AnthropicConversation {
  const system: TextBlockParam[] = [];
  const messages: MessageParam[] = [];
  for (const message of history) {
    if (message.role === "system") {
      // The first system message is the stable prompt prefix, worth caching across calls; later
      // ones hold per-run facts (the current time) that would only invalidate the cached prefix.
      system.push(
        system.length === 0
          ? { type: "text", text: message.content, cache_control: { type: "ephemeral" } }
          : { type: "text", text: message.content },
      );
      continue;
    }
    const blocks = contentBlocks(message);
    // Anthropic rejects empty turns; an assistant turn with neither text nor tool calls says nothing.
    if (blocks.length === 0) continue;
    const role = message.role === "assistant" ? "assistant" : "user";
    const previous = messages.at(-1);
    if (previous?.role === role) (previous.content as ContentBlockParam[]).push(...blocks);
    else messages.push({ role, content: blocks });
  }
  return { system, messages };
}

export function toAnthropicTool(tool: ToolDefinition): Tool {
  const { name, description, parameters } = tool.function;
  return { name, description, input_schema: { ...parameters, type: "object" } };
}

function contentBlocks(message: Exclude<ChatMessage, { role: "system" }>): ContentBlockParam[] {
  switch (message.role) {
    case "user":
      return typeof message.content === "string" ? textBlocks(message.content) : message.content.flatMap(partBlocks);
    case "assistant":
      return [
        // Sent back byte for byte: Anthropic verifies each thinking block against its signature.
        ...(message.reasoning?.blocks ?? []),
        ...textBlocks(message.content ?? ""),
        ...(message.toolCalls ?? []).map((call): ContentBlockParam => ({
          type: "tool_use",
          id: call.id,
          name: call.name,
          input: call.arguments ?? {},
        })),
      ];
    case "tool":
      return [
        {
          type: "tool_result",
          tool_use_id: message.toolCallId,
          content: message.content,
          ...(message.isError && { is_error: true }),
        },
      ];
  }
}

/** Anthropic rejects empty text blocks, so empty text is not sent at all. */
function textBlocks(text: string): TextBlockParam[] {
  return text === "" ? [] : [{ type: "text", text }];
}

function partBlocks(part: ContentPart): ContentBlockParam[] {
  return part.type === "text" ? textBlocks(part.text) : [imageBlock(part.image_url.url)];
}

function imageBlock(url: string): ImageBlockParam {
  if (!url.startsWith("data:")) return { type: "image", source: { type: "url", url } };
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!match) {
    throw new LLMError("client", `image data URL "${url.slice(0, 40)}…" is not base64 (expected data:<type>;base64,<data>)`);
  }
  const [, mediaType = "", data = ""] = match;
  if (!isImageMediaType(mediaType)) {
    throw new LLMError("client", `image data URL has media type "${mediaType}"; Anthropic accepts ${IMAGE_MEDIA_TYPES.join(", ")}`);
  }
  return { type: "image", source: { type: "base64", media_type: mediaType, data } };
}

function isImageMediaType(value: string): value is ImageMediaType {
  return (IMAGE_MEDIA_TYPES as readonly string[]).includes(value);
}
