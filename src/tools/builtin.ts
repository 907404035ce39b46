import { dirname } from "node:path";
import type { Config } from "../config/schema.js";
import { MemoryStore } from "../memory/store.js";
import { skillsDir } from "../skills/loader.js";
import { fileTools } from "./filesystem.js";
import { memoryTools } from "./memory.js";
import { PathGuard } from "./paths.js";
import type { SandboxChoice } from "./sandbox.js";
import { PER_RUN_TOOLS } from "./names.js";
import { ToolRegistry, toolsMatching } from "./registry.js";
import { EXEC_DEFAULTS, execTool, type ExecOptions } from "./shell.js";
import { webFetchTool } from "./web.js";

/** What a subagent may use: it works on files, commands and the web, never memory or more subagents. */
export const SUBAGENT_TOOLS = ["read_file", "write_file", "edit_file", "list_dir", "file_search", "exec", "web_fetch"];

/**
 * Every built-in tool but spawn (which needs an agent of its own), each set up from the config.
 * `sandbox`: what the runtime found; exec is left out when no sandbox is available to it.
 */
export function builtinTools(config: Config, memory: MemoryStore, sandbox?: SandboxChoice): ToolRegistry {
  const { tools } = config;
  const guard = pathGuard(config);
  const registry = new ToolRegistry().register(...fileTools({ guard }));
  if (tools.exec.enabled && sandbox?.kind !== "unavailable") {
    registry.register(execTool(execOptions(config, guard)));
  }
  return registry.register(webFetchTool({ allowHosts: tools.web.allowHosts }), ...memoryTools(memory));
}

/** The workspace's guard, as the file tools and exec apply it. */
export function pathGuard({ tools, paths }: Config): PathGuard {
  return new PathGuard({
    workspace: paths.workspace,
    restrictToWorkspace: tools.restrictToWorkspace,
    readOnlyRoots: tools.readOnlyRoots,
    instructionDirs: tools.writableSkills ? [] : [skillsDir(paths.workspace)],
  });
}

/** What exec runs with, from countd.yaml's tools.exec: a job's verify commands run the same way. */
export function execOptions(config: Config, guard: PathGuard): ExecOptions {
  const { tools, paths } = config;
  return {
    guard,
    timeoutMs: tools.exec.timeoutMs,
    maxOutputChars: EXEC_DEFAULTS.maxOutputChars,
    sandbox: tools.exec.sandbox,
    network: tools.exec.network,
    hiddenPaths: [paths.state, paths.logs, paths.jobs, ...(config.file ? [config.file, dirname(config.file)] : [])],
    denyPatterns: tools.exec.denyPatterns,
    allowList: tools.exec.allowList,
    envNames: tools.exec.envNames,
  };
}

/**
 * The tool names `names` stand for, globs expanded (spawn, added per run, is accepted too);
 * naming exec while it is switched off says so rather than "unknown tool", and so does a name
 * that `unlisted` explains (an MCP server whose tools are not known yet).
 */
export function selectTools(
  registry: ToolRegistry,
  names: readonly string[],
  config: Config,
  unlisted: (name: string) => string | undefined = () => undefined,
): string[] {
  if (!config.tools.exec.enabled && names.includes("exec")) {
    throw new Error("the exec tool is switched off in the configuration (tools.exec.enabled: false)");
  }
  if (names.includes("exec") && !registry.get("exec")) {
    throw new Error(
      "the exec tool is not offered: no sandbox is available to it (countd status and the start-up log say why and how to fix it)",
    );
  }
  for (const name of names) {
    const why = toolsMatching(name, [...registry.names, ...PER_RUN_TOOLS]).length === 0 ? unlisted(name) : undefined;
    if (why) throw new Error(why);
  }
  return registry.resolve(names, PER_RUN_TOOLS);
}
