import * as z from "zod";
import type { AgentLoop } from "./loop.js";
import type { SubagentManager } from "./subagents.js";
import { defineTool } from "../tools/registry.js";
import type { Tool } from "../tools/types.js";

/** `subagent` is the loop each delegated task runs on. */
export function spawnTool(subagents: SubagentManager, subagent: AgentLoop): Tool {
  return defineTool({
    name: "spawn",
    description:
      "Hand a self-contained task to a subagent and wait for its answer. The subagent starts with no " +
      "memory of this conversation and can use the file tools, exec and web_fetch only, so describe " +
      "the task fully: what to do, where, and what to report back.",
    parameters: z.object({
      task: z.string().min(1).describe("The complete task for the subagent, with every detail it needs."),
    }),
    async execute({ task }, ctx) {
      const { id, answer } = await subagents.run(subagent, task, ctx.signal, ctx.journal);
      return `[subagent ${id}]\n${answer}`;
    },
  });
}
