import path from "node:path";
import { displayPath, type JobFileResult } from "./load.js";

/**
 * A job file with problems, or from which no job is fired, and why: every place a user looks at
 * jobs shows these. `armed`: its job (the last good version) is fired all the same.
 */
export interface FileProblems {
  /** Absolute. */
  file: string;
  /** The job's name, or the file's when it gave no job. */
  name: string;
  armed: boolean;
  /** `path:line:col: message` lines. */
  problems: string[];
  /** The first problem without its place, and how many more there are: for a table's column. */
  reason: string;
}

/**
 * The files of `results` that have problems or give no job in `armed` (by file). `problems` are
 * those of the whole folder: a job whose name another file took, or whose after: chain is refused,
 * has its problem there, not in its file's result. `name` is the armed job's for a file whose last good version is fired.
 */
export function fileProblems(
  results: readonly JobFileResult[],
  armed: ReadonlyMap<string, string>,
  problems: readonly string[],
): FileProblems[] {
  return results
    .filter((result) => !armed.has(result.file) || result.problems.length > 0)
    .map((result) => {
      // A job refused for its chain (jobs/chains.ts) has its problems at its after: key.
      const places = [result.nameAt, ...(result.afterAt !== undefined ? [result.afterAt] : [])].map((place) => `${place}:`);
      const own =
        result.problems.length > 0 ? result.problems : problems.filter((problem) => places.some((place) => problem.startsWith(place)));
      return {
        file: result.file,
        name: armed.get(result.file) ?? result.job?.name ?? path.basename(result.file).replace(/\.ya?ml$/, ""),
        armed: armed.has(result.file),
        problems: own,
        reason: reasonOf(result.file, own),
      };
    });
}

/** `deliver[0].email.to[0]: environment variable REPORT_TO is not set (and 1 more)`: the place is in the lines on stderr. */
export function reasonOf(file: string, problems: readonly string[]): string {
  const first = problems[0];
  if (first === undefined) return "not read yet";
  const shown = `${displayPath(file)}:`;
  const text = first.startsWith(shown) ? first.slice(shown.length).replace(/^(\d+:\d+:)? /, "") : first;
  return problems.length > 1 ? `${text} (and ${problems.length - 1} more)` : text;
}
