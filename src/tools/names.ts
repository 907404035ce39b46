import type { Config } from "../config/schema.js";

/**
 * The built-in tools' names, in the order builtinTools registers them. Kept apart from the tools
 * themselves: `countd jobs`, `status` and `history` check a job's `tools:` against these names
 * and need none of the code behind them (the shell parser, the file tools, the web client).
 */
const FILE_TOOLS = ["read_file", "write_file", "edit_file", "list_dir", "file_search"];
const MEMORY_TOOLS = ["memory_write", "memory_search", "memory_read"];

/** Tools the runtime builds per run, so never in the registry builtinTools returns. */
export const PER_RUN_TOOLS = ["spawn"];

/**
 * The names a job's `tools:` may list: every built-in tool the configuration enables, and spawn.
 * Read from the configuration alone, so `validate` and `jobs` check them without opening a runtime.
 */
export function toolNames(config: Config): string[] {
  return [...FILE_TOOLS, ...(config.tools.exec.enabled ? ["exec"] : []), "web_fetch", ...MEMORY_TOOLS, ...PER_RUN_TOOLS];
}
