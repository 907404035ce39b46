import { createHash, randomBytes } from "node:crypto";

/**
 * `20261130T090000Z-3f2a`: sorts by start second, readable in logs and file names. On a daemon
 * that shares its backend with others (a node) the random part follows the node's tag, `20261130T090000Z-9c413f2a`: the runner keeps its
 * own ids apart, and the tag keeps them apart from other nodes' (random parts alone would repeat
 * once in 65,536 pairs of runs of a job started in the same second, one record replacing the other).
 */
export function runId(startedAt: Date, node?: string): string {
  const stamp = startedAt
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replace(/[-:]/g, "");
  return `${stamp}-${node === undefined ? "" : nodeTag(node)}${randomBytes(2).toString("hex")}`;
}

/** 4 hex digits from a node's name, in its run ids; Cluster.join warns when two nodes' names share one. */
export function nodeTag(node: string): string {
  return createHash("sha256").update(node).digest("hex").slice(0, 4);
}

/**
 * A run id none of `taken` has: ids share a second often enough (bursts, shutdown) that the
 * random part alone could repeat.
 */
export function uniqueRunId(taken: ReadonlySet<string>, at: Date, node?: string): string {
  let id: string;
  do id = runId(at, node);
  while (taken.has(id));
  return id;
}
