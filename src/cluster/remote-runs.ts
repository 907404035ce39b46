/** Runs in progress kept per other node; past it the oldest is dropped from the view (never from its node). */
export const RUNS_PER_NODE = 100;
/** Other nodes whose runs are kept at once; a node past it is not shown until one falls silent. */
export const MAX_NODES = 100;

/**
 * Which runs in progress of other nodes this node shows, oldest first: what a node that says it is
 * alive may make this node keep is bounded, however many runs it claims.
 */
export class RemoteRuns {
  private readonly byNode = new Map<string, Set<string>>();

  /**
   * `run` (`job/id`) started on `node`: the runs of it dropped to make room (the oldest), or
   * undefined when the node is one too many and `run` is not kept.
   */
  started(node: string, run: string): string[] | undefined {
    let runs = this.byNode.get(node);
    if (!runs) {
      if (this.byNode.size >= MAX_NODES) return undefined;
      runs = new Set();
      this.byNode.set(node, runs);
    }
    runs.add(run);
    const dropped: string[] = [];
    for (const oldest of runs) {
      if (runs.size <= RUNS_PER_NODE) break;
      runs.delete(oldest);
      dropped.push(oldest);
    }
    return dropped;
  }

  finished(node: string, run: string): void {
    this.byNode.get(node)?.delete(run);
  }

  /** `node` said which runs it still has (`keep`), or stopped or fell silent (none). */
  keepOnly(node: string, keep: ReadonlySet<string> = new Set()): void {
    const runs = this.byNode.get(node);
    if (!runs) return;
    for (const run of runs) if (!keep.has(run)) runs.delete(run);
    if (runs.size === 0) this.byNode.delete(node);
  }
}
