import { isAbsolute, relative, sep } from "node:path";

/** `path` relative to `root`, "" for the root itself, or undefined when it lies outside. Lexical: the caller resolves links first. */
export function relativeInside(path: string, root: string): string | undefined {
  const rel = relative(root, path);
  return rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel) ? undefined : rel;
}

/** Whether `path` is `root` or lies under it (lexically; "/ws-evil" is not under "/ws", "/ws/..x" is). */
export function isInside(path: string, root: string): boolean {
  return relativeInside(path, root) !== undefined;
}
