import { isMap, isScalar, isSeq } from "yaml";
import type { Problem, YamlPath, YamlSource } from "./yaml-errors.js";

const REFERENCE = /\$\{([^}]*)\}/g;
const NAME_AND_DEFAULT = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;
const UNCLOSED = /\$\{[^}]*$/;

/**
 * Replaces `${VAR}` and `${VAR:-default}` in every string value of the document, in place, from
 * `env`. Done on the parsed document rather than the text so a value can never break the YAML
 * structure, and so every node keeps its position for later messages. Keys are left alone.
 * Returns one problem per unset variable (or malformed reference), placed on the reference;
 * an unset variable in a value at a path `deferred` accepts is not a problem: that value's path
 * is returned in `unresolved` instead, for a command that does not use it.
 */
export function interpolateEnv(
  source: YamlSource,
  env: NodeJS.ProcessEnv,
  deferred: (path: YamlPath) => boolean = () => false,
): { problems: Problem[]; unresolved: YamlPath[] } {
  const problems: Problem[] = [];
  const unresolved: YamlPath[] = [];
  const walk = (node: unknown, path: YamlPath): void => {
    if (isMap(node)) {
      for (const pair of node.items) {
        if (isScalar(pair.key)) walk(pair.value, [...path, String(pair.key.value)]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, index) => walk(item, [...path, index]));
    } else if (isScalar(node) && typeof node.value === "string" && node.value.includes("${")) {
      const [start, end] = node.range ?? [0, 0];
      // The reference's own spelling is found in the raw text to place the problem on it, not just on the value.
      const at = (reference: string): number => {
        const index = source.text.slice(start, end).indexOf(reference);
        return index < 0 ? start : start + index;
      };
      const unclosed = UNCLOSED.exec(node.value);
      if (unclosed) problems.push({ path, offset: at(unclosed[0]), message: `unclosed variable reference "${unclosed[0]}": missing "}"` });
      node.value = node.value.replace(REFERENCE, (reference, inner: string) => {
        const parsed = NAME_AND_DEFAULT.exec(inner);
        if (!parsed) {
          problems.push({
            path,
            offset: at(reference),
            message: `invalid variable reference "${reference}": expected \${NAME} or \${NAME:-default}`,
          });
          return reference;
        }
        const [, name = "", fallback] = parsed;
        const value = env[name];
        if (value !== undefined && value !== "") return value;
        if (fallback !== undefined) return fallback;
        if (value === undefined && deferred(path)) unresolved.push(path);
        else if (value === undefined) problems.push({ path, offset: at(reference), message: `environment variable ${name} is not set` });
        return "";
      });
    }
  };
  walk(source.doc.contents, []);
  return { problems, unresolved };
}
