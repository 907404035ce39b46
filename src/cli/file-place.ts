import { readFileSync } from "node:fs";
import { formatPath, formatProblem, nodeOffset, parseYaml, type YamlPath } from "../config/yaml-errors.js";
import { displayPath } from "../jobs/load.js";

/**
 * `message` as `path:line:col: message`, placed at the node at `at` in the YAML file `file` (at
 * its key with `key`), for checks made on a loaded job or configuration, whose positions are gone:
 * the file is read again. `at` is named before the message, after `warning: ` for a warning; the
 * file alone when it cannot be read again.
 */
export function placed(file: string, at: YamlPath, message: string, opts: { warning?: boolean; key?: boolean } = {}): string {
  const text = `${opts.warning ? "warning: " : ""}${at.length > 0 ? `${formatPath(at)}: ` : ""}${message}`;
  const shown = displayPath(file);
  try {
    const { source } = parseYaml(shown, readFileSync(file, "utf8"));
    return formatProblem(source, { path: [], offset: nodeOffset(source, at, opts.key ? "key" : "value"), message: text });
  } catch {
    return `${shown}: ${text}`;
  }
}
