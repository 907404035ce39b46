import { isMap, isScalar, type Node } from "yaml";
import type { YamlSource } from "../config/yaml-errors.js";
import type { Job } from "./types.js";

/*
 * The chains `after:` makes between jobs, checked across the jobs folder: every upstream must be
 * a loaded job, and no chain may lead back to where it started, which would fire forever.
 */

/** `file:line:col` of a top-level key of a job file, where the problems about it are placed. */
export function keyLocation(source: YamlSource, key: string): string | undefined {
  const contents = source.doc.contents;
  if (!isMap(contents)) return undefined;
  const pair = contents.items.find((item) => isScalar(item.key) && item.key.value === key);
  const offset = (pair?.key as Node | undefined)?.range?.[0];
  if (offset === undefined) return undefined;
  const { line, col } = source.lineCounter.linePos(offset);
  return `${source.name}:${line}:${col}`;
}

/**
 * The jobs refused for their `after:` (in a cycle, or following a job that is not loaded) with
 * one problem line each, placed by `at` (the `after:` key of the job's file). A follower of a
 * refused job is refused in turn, since its upstream is then not loaded.
 */
export function chainProblems(jobs: readonly Job[], at: (job: Job) => string): { refused: Set<string>; problems: string[] } {
  const byName = new Map(jobs.map((job) => [job.name, job]));
  const refused = new Set<string>();
  const problems: string[] = [];
  for (const job of jobs) {
    if (!job.after || refused.has(job.name)) continue;
    const cycle = cycleFrom(job, byName);
    if (!cycle) continue;
    // Each job of the cycle is refused, each at its own after: key, the cycle read from it.
    for (const name of cycle.slice(0, -1)) {
      const member = byName.get(name)!;
      const from = cycle.indexOf(name);
      const named = [...cycle.slice(from, -1), ...cycle.slice(0, from), name].join(" → ");
      refused.add(name);
      problems.push(`${at(member)}: after: ${named} is a cycle: a job cannot follow itself, directly or through others`);
    }
  }
  for (let more = true; more;) {
    more = false;
    for (const job of jobs) {
      if (!job.after || refused.has(job.name)) continue;
      const upstream = job.after.job;
      if (byName.has(upstream) && !refused.has(upstream)) continue;
      refused.add(job.name);
      more = true;
      const why = byName.has(upstream)
        ? `the job "${upstream}" is not loaded: ${upstream}'s after: has a problem`
        : `no job named "${upstream}"`;
      problems.push(`${at(job)}: after.job: ${why}`);
    }
  }
  return { refused, problems };
}

/** The names along the chain from `job` when it comes back to `job` (`a, b, a`); undefined when it ends or joins another loop. */
function cycleFrom(job: Job, byName: ReadonlyMap<string, Job>): string[] | undefined {
  const path = [job.name];
  for (let next = job.after && byName.get(job.after.job); next; next = next.after && byName.get(next.after.job)) {
    path.push(next.name);
    if (next.name === job.name) return path;
    if (path.indexOf(next.name) < path.length - 1) return undefined;
  }
  return undefined;
}
