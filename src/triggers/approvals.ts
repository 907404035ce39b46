import { ApprovalDesk } from "../approvals/desk.js";
import type { Approval, ApprovalStore } from "../approvals/types.js";
import type { ApprovalDecision } from "../agent/loop.js";
import type { EventBus } from "../events.js";
import { silentLogger, type Logger } from "../log.js";
import type { FireRequest } from "../runner/types.js";
import type { RunReason } from "../store/run-record.js";
import { errorText } from "../text.js";
import { LONGEST_TIMER_MS } from "../timers.js";

/** How often the store is read for requests another node made or an answer given where no daemon ran. */
const SWEEP_MS = 60_000;

/**
 * The trigger of runs that waited for a person's yes: an answer (a link, the CLI, the console, a
 * timeout) fires the run again where it stopped. It knows which jobs have a run waiting, which
 * their overlap counts as running, and times each request out at its expiry.
 */
export class ApprovalTrigger {
  readonly desk: ApprovalDesk;
  /** The job of each approval whose run waits. */
  private readonly waitingRuns = new Map<string, string>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Answered approvals whose run went on (here or elsewhere): the sweep reads their runs no more. */
  private readonly settled = new Set<string>();
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  private closed = false;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly opts: {
      store: ApprovalStore;
      key: Buffer;
      /** Hands the run going on to the runner. */
      fire: (request: FireRequest) => void;
      events: EventBus;
      log?: Logger;
      now?: () => Date;
    },
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "approvals" });
    this.desk = new ApprovalDesk({
      store: opts.store,
      key: opts.key,
      resume: (approval) => void this.resume(approval),
      events: opts.events,
      ...(opts.now ? { now: opts.now } : {}),
    });
    this.unsubscribe = opts.events.on("run.waiting", ({ run, approval }) => {
      this.waitingRuns.set(approval.id, run.job);
      this.arm(approval);
    });
  }

  /** Whether the job has a run waiting for an answer. */
  waiting(job: string): boolean {
    for (const waiting of this.waitingRuns.values()) if (waiting === job) return true;
    return false;
  }

  /**
   * The daemon's start, then once a minute: each waiting request is timed out at its expiry (at
   * once when it passed while countd was down), and a run answered where no daemon ran (`countd
   * approve` alone) goes on. Where daemons share a backend this is how a node learns of the
   * requests of another, which may have stopped: any of them times a request out, once.
   */
  async start(): Promise<void> {
    await this.sweep();
    this.sweeper = setInterval(
      () => void this.sweep().catch((err: unknown) => this.log.error({ error: errorText(err) }, "could not read the approvals")),
      SWEEP_MS,
    );
    this.sweeper.unref();
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    this.unsubscribe();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private async sweep(): Promise<void> {
    const waiting = new Map<string, string>();
    for (const approval of await this.opts.store.list()) {
      if (approval.status === "waiting") {
        waiting.set(approval.id, approval.job);
        this.arm(approval);
      } else if (!this.settled.has(approval.id)) await this.resume(approval);
    }
    // The store knows every node's: a run that went on elsewhere no longer holds its job here.
    for (const id of this.waitingRuns.keys()) if (!waiting.has(id)) this.waitingRuns.delete(id);
    for (const [id, job] of waiting) this.waitingRuns.set(id, job);
  }

  private arm(approval: Approval): void {
    if (this.closed || this.timers.has(approval.id) || approval.status !== "waiting") return;
    const wait = Date.parse(approval.expiresAt) - (this.opts.now?.() ?? new Date()).getTime();
    const timer = setTimeout(
      () => {
        this.timers.delete(approval.id);
        // A timer longer than Node's longest is set again from where it got to.
        if (wait > LONGEST_TIMER_MS) return this.arm(approval);
        void this.desk
          .answer(approval.id, "timeout", { via: "timeout", by: "countd" })
          .catch((err: unknown) => this.log.error({ approval: approval.id, error: errorText(err) }, "could not time the approval out"));
      },
      Math.min(Math.max(wait, 0), LONGEST_TIMER_MS),
    );
    timer.unref();
    this.timers.set(approval.id, timer);
  }

  /**
   * The run goes on once: it is taken from the store first, so a crash before it starts leaves it
   * `waiting` in the history rather than running the approved call twice.
   */
  private async resume(approval: Approval): Promise<void> {
    clearTimeout(this.timers.get(approval.id));
    this.timers.delete(approval.id);
    try {
      const run = await this.opts.store.suspended(approval.id);
      const taken = run !== undefined && (await this.opts.store.resumed(approval.id));
      this.settled.add(approval.id);
      if (!taken) return;
      this.waitingRuns.delete(approval.id);
      const answered = approval.answer;
      this.log.info(
        { job: approval.job, runId: approval.run, approval: approval.id, answer: answered?.answer, by: answered?.by },
        "approval answered; the run goes on",
      );
      this.opts.fire({
        job: run.job,
        reason: run.reason as RunReason,
        scheduledAt: new Date(run.scheduledAt),
        at: new Date(run.clockAt),
        resume: { run, decision: decisionOf(approval), approval },
      });
    } catch (err) {
      this.log.error({ job: approval.job, runId: approval.run, approval: approval.id, error: errorText(err) }, "could not resume the run");
    }
  }
}

/** What the loop is told of the answer. */
function decisionOf(approval: Approval): ApprovalDecision {
  const answer = approval.answer;
  if (approval.status === "approved") return { approved: true };
  if (approval.status === "denied") {
    const note = answer?.note ? `: ${answer.note}` : "";
    return { approved: false, reason: `a person denied it (${answer?.by ?? "someone"}, from the ${answer?.via ?? "console"})${note}` };
  }
  const timedOut = `no one answered its approval request by ${approval.expiresAt}`;
  return approval.onTimeout === "fail"
    ? { fail: `${timedOut}, and approve.on_timeout is fail` }
    : { approved: false, reason: `${timedOut}, so it is denied` };
}
