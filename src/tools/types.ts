/*
 * The shape of a tool, apart from the registry that frames and runs tools, so the framing
 * (untrusted.ts) and every tool family can name it without importing the registry back.
 */
import type { z } from "zod";

export interface ToolContext {
  sessionId: string;
  workspace: string;
  signal: AbortSignal;
  /** A file tool reports each file it wrote, so a watch trigger can tell a run's own writes apart. */
  wrote?: (path: string) => void;
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
  /** Returns the text the LLM reads; throws to report a failure (which may be retried). */
  execute(args: z.infer<S>, ctx: ToolContext): Promise<string>;
}
