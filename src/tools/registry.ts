import { z } from "zod";
import type { ToolDefinition } from "../providers/types.js";
import type { Tool } from "./types.js";
import { asRun } from "./untrusted.js";

export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool<S> {
  return tool;
}

/**
 * Kept by tool, not by registry: the daemon builds a registry for every run (its job's tools), and
 * would otherwise turn each tool's zod schema into JSON Schema again for each run. A tool's schema
 * does not change once defined; callers only read the definitions.
 */
const definitions = new WeakMap<Tool, ToolDefinition>();

function definitionOf(tool: Tool): ToolDefinition {
  let definition = definitions.get(tool);
  if (!definition) {
    const { $schema: _ignored, ...parameters } = z.toJSONSchema(tool.parameters, { io: "input" }) as Record<string, unknown>;
    definitions.set(tool, (definition = { type: "function", function: { name: tool.name, description: tool.description, parameters } }));
  }
  return definition;
}

export type ValidationResult = { ok: true; args: unknown } | { ok: false; error: string };

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private definitions: ToolDefinition[] | undefined;

  register(...tools: Tool[]): this {
    for (const tool of tools) {
      if (this.tools.has(tool.name)) throw new Error(`tool "${tool.name}" is registered twice`);
      this.tools.set(tool.name, tool as Tool);
    }
    this.definitions = undefined;
    return this;
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name);
  }

  /** The tool as the agent loop runs it: its output framed as untrusted data when it is marked so. */
  forAgent(name: string): Tool | undefined {
    const tool = this.tools.get(name);
    return tool && asRun(tool);
  }

  get names(): string[] {
    return [...this.tools.keys()];
  }

  /**
   * A registry holding only the named tools; an unknown name is an error, not a silent gap. This
   * is the one check of tool names at run time. `added`: names the caller registers afterwards
   * itself (spawn, built per run), accepted here and left out.
   */
  subset(names: readonly string[], added: readonly string[] = []): ToolRegistry {
    const known = [...this.names, ...added];
    const unknown = names.filter((n) => !known.includes(n));
    if (unknown.length > 0) throw new Error(`unknown tool(s): ${unknown.join(", ")} (known: ${known.join(", ")})`);
    return new ToolRegistry().register(...names.flatMap((n) => this.tools.get(n) ?? []));
  }

  /** OpenAI function-calling form; computed once, since the loop asks every iteration. */
  getDefinitions(): ToolDefinition[] {
    this.definitions ??= [...this.tools.values()].map(definitionOf);
    return this.definitions;
  }

  validate(tool: Tool, args: unknown): ValidationResult {
    const parsed = tool.parameters.safeParse(args);
    if (parsed.success) return { ok: true, args: parsed.data };
    return { ok: false, error: z.prettifyError(parsed.error) };
  }
}
