import * as z from "zod";
import { defineTool } from "./registry.js";
import type { Tool } from "./types.js";

export interface HeartbeatResponse {
  notify: boolean;
  message: string;
}

export const HEARTBEAT_RESPOND = "heartbeat_respond";

/**
 * The heartbeat agent's only way to speak: the answer text of a heartbeat run is never
 * delivered, so a check-in exists only if this tool was called. One tool per run; the first call
 * is the decision, so a model that calls twice cannot turn "stay quiet" into a message later.
 */
export function heartbeatRespondTool(): { tool: Tool; result(): HeartbeatResponse | undefined } {
  let response: HeartbeatResponse | undefined;
  const tool = defineTool({
    name: HEARTBEAT_RESPOND,
    description:
      "Records the outcome of this heartbeat check-in. Call it exactly once. " +
      "notify true sends `message` to the user as it is (for example by email); notify false sends nothing.",
    parameters: z.object({
      notify: z.boolean().describe("true only when something is worth telling the user now; false when nothing is."),
      message: z
        .string()
        .default("")
        .describe("The check-in to send, complete and self-contained, in the user's language; empty when notify is false."),
    }),
    async execute(args) {
      if (response) return "Ignored: this check-in was already recorded by an earlier call. End your turn now.";
      response = { notify: args.notify, message: args.message };
      return args.notify
        ? "Recorded: the message will be sent. End your turn now; your reply text is not delivered."
        : "Recorded: nothing will be sent. End your turn now.";
    },
  });
  return { tool: tool as Tool, result: () => response };
}
