import type { Config } from "../config/schema.js";
import { toolNames } from "../tools/builtin.js";
import type { JobContext } from "./load.js";

/**
 * What job files are checked against, from the configuration alone: every command (start, run,
 * jobs, validate) builds it here, so a job one of them accepts is accepted by all. `env`: where
 * delivery variables are looked up; null for the commands that send nothing.
 */
export function jobContext(config: Config, env: NodeJS.ProcessEnv | null = process.env): JobContext {
  return {
    workspace: config.paths.workspace,
    defaultTimezone: config.timezone,
    knownTools: toolNames(config),
    env,
    jobEnv: config.jobEnv,
    secretNames: config.secretNames,
  };
}
