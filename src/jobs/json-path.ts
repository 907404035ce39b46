import { createRequire } from "node:module";

/**
 * Loaded with the first path used: most job files hold none (`changed_on:`, `verify: expect:`,
 * `{{output.…}}`), and commands that read every job file need not compile it. Required, as the
 * checks here are synchronous.
 */
let loaded: typeof import("jsonpath-plus").JSONPath | undefined;
const jsonPath = () => (loaded ??= (createRequire(import.meta.url)("jsonpath-plus") as typeof import("jsonpath-plus")).JSONPath);

/**
 * The values a JSONPath (RFC 9535 style, jsonpath-plus) selects in a JSON value, in document
 * order; none when nothing matches. Paths come from job files (`changed_on:`, `verify: expect:`),
 * but script filters are off all the same: a path selects, it never runs code.
 */
export function selectPath(value: unknown, path: string): unknown[] {
  return jsonPath()({ path, json: value as object, wrap: true, eval: false }) as unknown[];
}

/** Why a path cannot be used, or undefined when it can: job checks name it at its line. */
export function pathProblem(path: string): string | undefined {
  if (!path.startsWith("$")) return `a JSONPath starts with $, got ${JSON.stringify(path)}`;
  try {
    selectPath({}, path);
    return undefined;
  } catch (err) {
    return `not a JSONPath: ${(err as Error).message}`;
  }
}
