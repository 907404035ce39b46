import type { ApprovalsView } from "../console/approvals-protocol.js";
import type { LiveMessage, RunNowAnswer } from "../console/protocol.js";
import { DaemonRefused, type Daemon } from "./control.js";
import { CANCELLED_BY_USER, EXIT, exitForStatus, toolLine } from "./output.js";
import { reportRun, type DeliveryOutcome } from "./run-summary.js";

type Finished = Extract<LiveMessage, { type: "run_finished" }>;

/** A delivery's statuses once its first attempt is over: sent, to be retried, or given up. */
// A held delivery is not attempted until released: the command does not wait for it.
const ATTEMPTED: ReadonlySet<string> = new Set(["delivered", "failed", "dead", "held"]);

/**
 * `countd run <job>` beside a running daemon: the daemon runs it (reason manual, through its
 * runner, so its concurrency limit and the job's overlap policy apply) and this command shows it
 * as a local run would: the answer on stdout, a line per tool call on stderr, the same exit codes.
 * Like a local run it returns once each of the run's deliveries had its first attempt, and says
 * which failed. Ctrl-C cancels the run (or stops waiting for its deliveries); a second one leaves
 * at once and lets the daemon finish cancelling.
 */
export async function runInDaemon(daemon: Daemon, job: string): Promise<number> {
  let runId: string | undefined;
  const early: LiveMessage[] = [];
  const args = new Map<string, unknown>();
  let last = "";
  let finish: (message: Finished) => void = () => {};
  const finished = new Promise<Finished>((resolve) => (finish = resolve));
  const deliveries = deliveryWatch();
  let ended = false;

  const show = (message: LiveMessage) => {
    if (!("run_id" in message) || message.run_id !== runId) return;
    if (message.type === "stream") {
      process.stdout.write(message.content);
      last = message.content;
    } else if (message.type === "tool_start") args.set(message.call_id, message.arguments);
    else if (message.type === "tool_result")
      process.stderr.write(`${toolLine(message.name, args.get(message.call_id), Boolean(message.error), message.duration_ms)}\n`);
    else if (message.type === "run_finished") finish(message);
    else if (message.type === "delivery") deliveries.note(message);
  };
  // Subscribed to the job before asking for the run: its messages may come before the answer naming it.
  const live = await daemon.live({ job }, (message) => (runId === undefined ? early.push(message) : show(message)));

  let interrupted = false;
  const cancel = () => {
    daemon
      .call(
        "POST",
        `/api/runs/${encodeURIComponent(runId!)}/cancel?job=${encodeURIComponent(job)}&reason=${encodeURIComponent(CANCELLED_BY_USER)}`,
      )
      .catch((err: unknown) => {
        // Refused when it ended meanwhile: run_finished says how.
        if (!(err instanceof DaemonRefused && err.status === 409))
          process.stderr.write(`countd: could not cancel run ${runId}: ${(err as Error).message}\n`);
      });
  };
  let stopWaiting = () => {};
  const waitStopped = new Promise<void>((resolve) => (stopWaiting = resolve));
  const onSigint = () => {
    if (interrupted) process.exit(EXIT.interrupted);
    interrupted = true;
    if (ended) stopWaiting();
    else if (runId !== undefined) cancel();
  };
  process.on("SIGINT", onSigint);
  try {
    let answer: RunNowAnswer;
    try {
      answer = await daemon.call<RunNowAnswer>("POST", `/api/jobs/${encodeURIComponent(job)}/run?wait=start`);
    } catch (err) {
      if (!(err instanceof DaemonRefused && err.status === 409)) throw err;
      answer = err.body as RunNowAnswer;
    }
    if (answer.status === "skipped") {
      process.stderr.write(`countd: run ${answer.run_id} skipped: ${answer.message}\n`);
      return EXIT.failure;
    }
    if (answer.status !== "started") throw new Error(`the daemon did not start the run: ${answer.message}`);
    runId = answer.run_id;
    early.splice(0).forEach(show);
    if (interrupted) cancel();
    const gone = live.closed.then(({ reason }) => {
      throw new Error(
        `the daemon closed the live stream before run ${runId} ended${reason ? ` (${reason})` : ""}; countd history shows how it ended`,
      );
    });
    const end = await Promise.race([finished, gone]);
    ended = true;
    if (last && !last.endsWith("\n")) process.stdout.write("\n");
    await deliveries.attempted(Promise.race([waitStopped, live.closed]));
    const approval = end.status === "waiting" ? await waitingApproval(daemon, job, end.run_id) : undefined;
    reportRun(
      { id: end.run_id, status: end.status, ...(end.error ? { error: end.error } : {}), ...(approval ? { approval } : {}) },
      deliveries.outcomes(),
    );
    return exitForStatus(end.status);
  } finally {
    process.off("SIGINT", onSigint);
    live.close();
  }
}

/** The id of the approval a run waits on, as the daemon lists it. */
async function waitingApproval(daemon: Daemon, job: string, run: string): Promise<string | undefined> {
  const { approvals } = await daemon.call<ApprovalsView>("GET", "/api/approvals");
  return approvals.find((approval) => approval.job === job && approval.run === run)?.id;
}

/** A run's deliveries as the live stream tells of them: all are queued before the run's end is told. */
function deliveryWatch() {
  const states = new Map<string, { status: string; to: string; error?: string }>();
  let changed = () => {};
  return {
    note(message: Extract<LiveMessage, { type: "delivery" }>): void {
      states.set(message.id, { status: message.status, to: message.to, ...(message.error !== undefined ? { error: message.error } : {}) });
      changed();
    },
    /** Resolves once each delivery had its first attempt, or when `stop` resolves. */
    attempted(stop: Promise<unknown>): Promise<void> {
      return new Promise((resolve) => {
        changed = () => [...states.values()].every((state) => ATTEMPTED.has(state.status)) && resolve();
        changed();
        void stop.then(() => resolve());
      });
    },
    /** Each delivery as a local run reports it: one not attempted yet (Ctrl-C stopped the wait) is still queued. */
    outcomes(): DeliveryOutcome[] {
      return [...states.entries()].map(([id, { status, to, error }]) => ({
        id,
        to,
        state: status === "delivered" ? "delivered" : status === "dead" ? "failed" : status === "held" ? "held" : "queued",
        ...(error !== undefined ? { error } : {}),
      }));
    },
  };
}
