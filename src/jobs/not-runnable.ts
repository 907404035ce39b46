import path from "node:path";
import { displayPath, listJobFiles } from "./load.js";
import type { Job } from "./types.js";

/**
 * Why a command (`countd run`, `test-delivery`, `rehearse`) found no job `name` in `dir`: the file
 * named after it is invalid (its problems only), or there is none, with the jobs there are and the
 * files that are invalid (one may hold the job under a `name:` key, which an invalid file does not
 * reveal).
 */
export async function notRunnable(name: string, dir: string, loaded: readonly Job[], problems: readonly string[]): Promise<Error> {
  const listed = await listJobFiles(dir);
  const files = "files" in listed ? listed.files.map(displayPath) : [];
  const problemsOf = (file: string) => problems.filter((problem) => problem.startsWith(`${file}:`));
  const own = files.find((file) => path.basename(file).replace(/\.ya?ml$/, "") === name && problemsOf(file).length > 0);
  if (own) return new Error(`${own} is invalid:\n${problemsOf(own).join("\n")}`);
  const known = loaded.map((job) => job.name);
  const invalid = files.filter((file) => problemsOf(file).length > 0);
  const hint =
    invalid.length === 0
      ? ""
      : `; ${invalid.length === 1 ? "1 job file is" : `${invalid.length} job files are`} invalid: ${invalid.join(", ")} (countd validate lists their problems)`;
  return new Error(`no job named "${name}" in ${displayPath(path.resolve(dir))} (jobs: ${known.join(", ") || "none"})${hint}`);
}
