import path from "node:path";
import { plural } from "../text.js";
import { displayPath, listJobFiles, readJobFiles, selectJobs, type JobContext } from "./load.js";
import type { Job } from "./types.js";

/**
 * What `countd validate` prints: the problems and warnings, then one summary line; warnings do not
 * fail it. `more`: what the command finds about the valid jobs beyond their files (unpriced models, approvals).
 */
export async function validateJobs(
  dir: string,
  ctx: JobContext,
  more: (jobs: readonly Job[]) => { problems: string[]; warnings: string[] } = () => ({ problems: [], warnings: [] }),
): Promise<{ lines: string[]; ok: boolean; summary: string }> {
  const listed = await listJobFiles(dir);
  const results = "files" in listed ? await readJobFiles(listed.files, ctx) : [];
  const { jobs, problems: unloaded } = "files" in listed ? selectJobs(results) : { jobs: [], problems: [listed.problem] };
  const found = more(jobs);
  const problems = [...unloaded, ...found.problems];
  const warnings = [...results.flatMap((result) => result.warnings), ...found.warnings];
  const where = `${displayPath(path.resolve(dir))}${path.sep}`;
  const valid = `${plural(jobs.length, "job")} valid`;
  const warned = warnings.length > 0 ? `, ${plural(warnings.length, "warning")}` : "";
  const summary =
    problems.length === 0
      ? `${valid} in ${where}${warned ? ` (${warned.slice(2)})` : ""}`
      : `${plural(problems.length, "problem")} in ${where} (${valid}${warned})`;
  return { lines: [...problems, ...warnings], ok: problems.length === 0, summary };
}
