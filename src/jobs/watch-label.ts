import path from "node:path";
import { escapePath } from "tinyglobby";

/**
 * A watch trigger as its owner wrote it: `watch inbox/*.csv, /srv/drop/*.txt`. load.ts made the
 * globs absolute by joining them to the (escaped) workspace; those are shown relative to it again.
 */
export function watchLabel(paths: readonly string[], workspace: string): string {
  const base = path.join(escapePath(workspace), "/");
  return `watch ${paths.map((pattern) => (pattern.startsWith(base) ? pattern.slice(base.length) : pattern)).join(", ")}`;
}
