import * as z from "zod";
import type { ChatMessage } from "../providers/types.js";

const contentPart = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("text"), text: z.string() }),
  z.looseObject({ type: z.literal("image_url"), image_url: z.looseObject({ url: z.string() }) }),
]);

/** A tool call as the loop keeps it: also what a run suspended for an approval waits on. */
export const toolCallShape = z.looseObject({
  id: z.string(),
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).nullable(),
  rawArguments: z.string(),
});

const thinkingBlock = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
  z.looseObject({ type: z.literal("redacted_thinking"), data: z.string() }),
]);

/**
 * A session message as a store gives it back: what a provider may be sent again, checked, because a
 * shared store may hold what another countd version (or a hand) wrote.
 */
export const chatMessageShape = z.discriminatedUnion("role", [
  z.looseObject({ role: z.literal("system"), content: z.string() }),
  z.looseObject({ role: z.literal("user"), content: z.union([z.string(), z.array(contentPart)]) }),
  z.looseObject({
    role: z.literal("assistant"),
    content: z.string().nullable(),
    toolCalls: z.array(toolCallShape).optional(),
    reasoning: z.looseObject({ text: z.string(), blocks: z.array(thinkingBlock).optional() }).optional(),
  }),
  z.looseObject({
    role: z.literal("tool"),
    toolCallId: z.string(),
    name: z.string(),
    content: z.string(),
    isError: z.boolean().optional(),
  }),
]) satisfies z.ZodType<ChatMessage>;
