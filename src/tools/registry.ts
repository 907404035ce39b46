import picomatch from "picomatch";
import * as z from "zod";
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
    const { $schema: _ignored, ...parameters } =
      tool.inputSchema ?? (z.toJSONSchema(tool.parameters, { io: "input" }) as Record<string, unknown>);
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
   * The tool names `names` stand for, in order and each once: a name, or a glob (`mcp_notes_*`)
   * for every tool it matches. A name or glob that stands for nothing is an error, not a silent
   * gap. `added`: names the caller registers afterwards itself (spawn, built per run), accepted.
   */
  resolve(names: readonly string[], added: readonly string[] = []): string[] {
    const known = [...this.names, ...added];
    const resolved = names.map((name) => ({ name, found: toolsMatching(name, known) }));
    const unknown = resolved.filter(({ found }) => found.length === 0).map(({ name }) => name);
    if (unknown.length > 0) throw new Error(`unknown tool(s): ${unknown.join(", ")} (known: ${known.join(", ")})`);
    return [...new Set(resolved.flatMap(({ found }) => found))];
  }

  /**
   * A registry holding only the tools `names` stand for (see resolve). This is the one check of
   * tool names at run time; the `added` names are accepted and left out.
   */
  subset(names: readonly string[], added: readonly string[] = []): ToolRegistry {
    return new ToolRegistry().register(...this.resolve(names, added).flatMap((n) => this.tools.get(n) ?? []));
  }

  /** A registry with these tools and `more`. */
  with(more: readonly Tool[]): ToolRegistry {
    return new ToolRegistry().register(...this.tools.values(), ...more);
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

/** `name` when it is one of `known`; for a glob, every one of `known` it matches. */
export function toolsMatching(name: string, known: readonly string[]): string[] {
  if (!picomatch.scan(name).isGlob) return known.includes(name) ? [name] : [];
  const matches = picomatch(name);
  return known.filter((candidate) => matches(candidate));
}
