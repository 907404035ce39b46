import type { EventBus } from "../events.js";
import type { Upstream } from "../jobs/template.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { FireRequest } from "../runner/types.js";
import { REHEARSAL_REASONS, type RunRecord } from "../store/run-record.js";

export interface AfterTriggerOptions {
  events: EventBus;
  /** The jobs loaded now, asked at each run's end: a reload's added and removed followers count at once. */
  jobs: () => readonly Job[];
  fire: (request: FireRequest) => void;
  log?: Logger;
}

/**
 * Fires the jobs that follow another (`after:`) when a run of it ends with one of their statuses.
 * It listens to the runner's own `run.finished`, which a node's bus hears only of the runs that
 * node's runner ran: where daemons share a backend, each upstream run fires its followers once, on
 * the node where it ended. An attempt that will be retried is not its fire's end, and a fire that
 * was skipped (overlap, paused) or cancelled before it started never ran, so neither fires anything.
 */
export class AfterTrigger {
  private readonly log: Logger;
  private readonly unsubscribe: () => void;

  constructor(private readonly opts: AfterTriggerOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "after" });
    this.unsubscribe = opts.events.on("run.finished", ({ run, willRetry, outcome }) => {
      if (willRetry || !outcome || REHEARSAL_REASONS.includes(run.reason)) return;
      this.finished(run, outcome.answer, outcome.output);
    });
  }

  close(): void {
    this.unsubscribe();
  }

  private finished(run: RunRecord, answer: string, output: unknown): void {
    const followers = this.opts
      .jobs()
      .filter((job) => job.enabled && job.after?.job === run.job && job.after.statuses.includes(run.status));
    if (followers.length === 0) return;
    const upstream: Upstream = { job: run.job, runId: run.id, status: run.status, answer, ...outputOf(answer, output) };
    for (const job of followers) {
      this.log.info({ job: job.name, upstream: run.job, upstreamRun: run.id, status: run.status }, "job fires after its upstream run");
      this.opts.fire({ job: job.name, reason: "after", scheduledAt: new Date(run.finishedAt ?? Date.now()), upstream });
    }
  }
}

/** The typed output, or else the answer read as JSON when it is JSON: `{{upstream.output.…}}` reads it. */
function outputOf(answer: string, output: unknown): { output?: unknown } {
  if (output !== undefined) return { output };
  try {
    return { output: JSON.parse(answer) as unknown };
  } catch {
    return {};
  }
}
