import { setTimeout as sleep } from "node:timers/promises";
import type { EventBus } from "../events.js";
import type { ToolCall } from "../providers/types.js";
import type { ToolHistory } from "../audit/tool-history.js";
import type { JournalWriter } from "../store/journal-entries.js";
import { ToolError } from "../tools/types.js";
import type { ToolRegistry } from "../tools/registry.js";
import { errorText, excerpt } from "../text.js";
import { CancelToken } from "./cancel.js";

/** How one tool call ended, as the loop hands it to the model. */
export interface ToolOutcome {
  content: string;
  isError: boolean;
  attempts: number;
  durationMs: number;
}

/**
 * What a replay or a fork knows of the tool calls of the run it repeats: a call it has a recorded
 * result for is answered with it and does not run; `refused` answers a call that must not run.
 * Undefined: the call runs.
 */
export interface RecordedCalls {
  serve(call: ToolCall): ToolOutcome | { refused: string } | undefined;
}

/** What running a tool call needs of the loop that asks for it. */
export interface ToolCallDeps {
  tools: ToolRegistry;
  workspace: string;
  toolHistory?: Pick<ToolHistory, "record" | "flush">;
  events: EventBus;
  maxRetries: number;
  retryDelayMs: number;
}

/**
 * Runs one tool call: unknown names, unparsable or invalid arguments become error results at
 * once (retrying cannot fix them); a tool that throws is tried up to maxRetries times, unless
 * it says its error is not retryable (a refusal, a missing file, an MCP call that failed).
 */
export async function runToolCall(
  deps: ToolCallDeps,
  call: ToolCall,
  ctx: {
    sessionId: string;
    userMessage?: string;
    cancelToken?: CancelToken;
    journal?: JournalWriter;
    /** A replay's or a fork's answer to the call (RecordedCalls.serve), asked by the loop. */
    served?: ReturnType<RecordedCalls["serve"]>;
  },
): Promise<ToolOutcome> {
  const { tools, workspace, toolHistory, events } = deps;
  const cancel = ctx.cancelToken ?? new CancelToken();
  const started = performance.now();
  const tool = tools.forAgent(call.name);
  const server = tool?.server !== undefined ? { server: tool.server } : {};
  events.emit("tool.started", {
    sessionId: ctx.sessionId,
    callId: call.id,
    name: call.name,
    arguments: call.arguments ?? call.rawArguments,
    ...server,
  });

  let content: string;
  let isError = true;
  let attempts = 0;
  const validation = tool && call.arguments !== null ? tools.validate(tool, call.arguments) : undefined;
  const { served } = ctx;
  if (served && "refused" in served) {
    content = `Error: not run, ${served.refused}.`;
  } else if (served) {
    ({ content, isError, attempts } = served);
  } else if (!tool) {
    content = `Error: unknown tool "${call.name}". Available tools: ${tools.names.join(", ") || "none"}.`;
  } else if (!validation) {
    content = `Error: the arguments for ${call.name} are not valid JSON: ${excerpt(JSON.stringify(call.rawArguments), 200, ` (${call.rawArguments.length} characters)`)}`;
  } else if (!validation.ok) {
    content = `Error: invalid arguments for ${call.name}:\n${validation.error}`;
  } else {
    content = "Error: not run, the run was cancelled.";
    for (let attempt = 1; attempt <= deps.maxRetries && !cancel.cancelled; attempt++) {
      attempts = attempt;
      try {
        content = await tool.execute(validation.args, {
          sessionId: ctx.sessionId,
          workspace,
          signal: cancel.signal,
          wrote: (path) => events.emit("file.written", { sessionId: ctx.sessionId, path }),
          ...(ctx.journal ? { journal: ctx.journal } : {}),
        });
        isError = false;
        break;
      } catch (err) {
        content = `Error: ${errorText(err)}`;
        // The tool knows: a refusal or a missing file gives the same answer every time, and a call whose outcome is unknown may have acted.
        if (err instanceof ToolError && !err.retryable) break;
        if (attempt < deps.maxRetries) await sleep(deps.retryDelayMs, undefined, { signal: cancel.signal }).catch(() => {});
      }
    }
  }

  const durationMs = performance.now() - started;
  events.emit("tool.finished", {
    sessionId: ctx.sessionId,
    callId: call.id,
    name: call.name,
    arguments: call.arguments ?? call.rawArguments,
    result: content,
    durationMs,
    attempts,
    ...server,
    ...(isError ? { error: content } : {}),
  });
  // A run's tool calls are in its journal, whole; the tool history keeps those of messages with none (countd ask).
  if (!ctx.journal)
    toolHistory?.record({
      sessionId: ctx.sessionId,
      toolName: call.name,
      arguments: call.arguments ?? call.rawArguments,
      userMessage: ctx.userMessage ?? "",
      result: content,
      durationMs,
    });
  return { content, isError, attempts, durationMs };
}
