/*
 * The shape of a tool, apart from the registry that frames and runs tools, so the framing
 * (untrusted.ts) and every tool family can name it without importing the registry back.
 */
import type { z } from "zod";
import type { JournalWriter } from "../store/journal-entries.js";

export interface ToolContext {
  sessionId: string;
  workspace: string;
  signal: AbortSignal;
  /** A file tool reports each file it wrote, so a watch trigger can tell a run's own writes apart. */
  wrote?: (path: string) => void;
  /** The run's journal, for a tool that runs steps of its own (a subagent's). */
  journal?: JournalWriter;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  parameters: S;
  /**
   * What it returns comes from outside countd (files, commands, memory): the registry frames it
   * as untrusted data before the LLM reads it.
   */
  untrusted?: boolean;
  /**
   * A JSON Schema sent to the LLM as it is, instead of one made from `parameters`: an MCP
   * server's, which the server checks itself (`parameters` then only needs an object).
   */
  inputSchema?: Record<string, unknown>;
  /** The MCP server the tool comes from: its results are labelled with it, and audit lines name it. */
  server?: string;
  /** Returns the text the LLM reads; throws to report a failure (retried unless a ToolError says it is not retryable). */
  execute(args: z.infer<S>, ctx: ToolContext): Promise<string>;
}

/**
 * A tool's failure with the tool's own word on another attempt: `retryable` is false when the
 * same call would fail the same way (a missing file, a refusal, a malformed URL) or must not be
 * risked (a call whose outcome is unknown), true when the cause may pass (a timeout, a busy
 * server or file). Anything else a tool throws is tried again, as the tool did not say.
 */
export class ToolError extends Error {
  override readonly name: string = "ToolError";

  constructor(
    message: string,
    readonly retryable: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A failure another attempt cannot mend or must not risk: the loop hands its message to the LLM at once. */
export class FinalToolError extends ToolError {
  override readonly name: string = "FinalToolError";

  constructor(message: string, options?: ErrorOptions) {
    super(message, false, options);
  }
}
