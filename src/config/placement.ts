import { realpath } from "node:fs/promises";
import path from "node:path";
import { isInside } from "../inside.js";
import type { Config } from "./schema.js";
import type { Problem } from "./yaml-errors.js";

/**
 * What the daemon reads as instructions or trusts as its own record, each of which the agent must
 * not be able to write: job files are run as soon as they appear, countd.yaml (and a .env beside
 * it) names what jobs may reach, state and logs are the daemon's memory of what happened. The
 * tools write only inside the workspace, so none of them may lie inside it.
 */
const GUARDED = [
  { key: "state_dir", folder: "state", why: "the agent could edit the daemon's state" },
  { key: "logs_dir", folder: "logs", why: "the agent could rewrite the audit log" },
  { key: "jobs_dir", folder: "jobs", why: "the agent could write job files, which the daemon runs at once" },
] as const;

/**
 * One problem per guarded folder inside the workspace, and one when the workspace holds the
 * configuration's own folder. Compared as real paths (every symlink of the part that exists
 * followed), so a link does not hide that two folders are one.
 */
export async function placementProblems(paths: Config["paths"], configDir: string | undefined): Promise<Problem[]> {
  const workspace = await realPath(paths.workspace);
  const problems: Problem[] = [];
  for (const { key, folder, why } of GUARDED) {
    const real = await realPath(paths[folder]);
    if (isInside(real, workspace)) {
      problems.push({
        path: [key],
        message: `${paths[folder]}${shownReal(paths[folder], real)} is inside the workspace ${paths.workspace}: ${why}`,
      });
    }
  }
  if (configDir !== undefined) {
    const real = await realPath(configDir);
    if (isInside(real, workspace)) {
      problems.push({
        path: ["workspace"],
        message: `${paths.workspace} holds this file's folder ${configDir}${shownReal(configDir, real)}: the agent could rewrite the configuration`,
      });
    }
  }
  return problems;
}

const shownReal = (written: string, real: string) => (written === real ? "" : ` (really ${real})`);

/** `target` with every symlink of its existing part followed: where a write to it would land. */
async function realPath(target: string): Promise<string> {
  try {
    return await realpath(target);
  } catch {
    const parent = path.dirname(target);
    return parent === target ? target : path.join(await realPath(parent), path.basename(target));
  }
}
