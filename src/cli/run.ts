import type { CancelToken } from "../agent/cancel.js";
import { loadConfig } from "../config/load.js";
import { jobContext } from "../jobs/context.js";
import { loadJobsDir } from "../jobs/load.js";
import { notRunnable } from "../jobs/not-runnable.js";
import { daemonLogger } from "../log.js";
import { jobOfSession } from "../runner/session-ids.js";
import { acquireLock } from "../store/lock.js";
import { openCore } from "../core.js";
import { DaemonRefused, findDaemon } from "./control.js";
import { CANCELLED_BY_USER, EXIT, exitForStatus, printToolCalls } from "./output.js";
import { runInDaemon } from "./run-daemon.js";
import { deliveredTo, reportRun, targetIndex } from "./run-summary.js";
import { describeTarget } from "../delivery/targets.js";
import type { OutboxEntry } from "../store/outbox-store.js";

/**
 * `countd run <job>`: one run now, in the foreground, recorded like any other. With a daemon on
 * the same state directory the run happens inside it (runInDaemon); without one, here, under the
 * state lock.
 */
export async function runJob(name: string, opts: { config?: string }): Promise<number> {
  // The daemon holds the secrets it runs with: a command that only asks it to run needs none.
  const located = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await findDaemon(located.paths.state);
  if (daemon) {
    return runInDaemon(daemon, name).catch(async (err: unknown) => {
      if (!(err instanceof DaemonRefused && err.status === 404)) throw err;
      // Said as a run here says it: the job's own invalid file, or the jobs there are.
      const { jobs, problems } = await loadJobsDir(located.paths.jobs, jobContext(located, null));
      throw await notRunnable(name, located.paths.jobs, jobs, problems);
    });
  }
  const config = await loadConfig({ file: opts.config });
  const release = await acquireLock(config.paths.state);
  // stdout carries the answer only, whatever the run's status: a script pipes it on.
  const logger = daemonLogger({ secrets: config.secrets, level: "warn", destination: 2 });
  let interrupted = false;
  let current: CancelToken | undefined;
  // Opened as the daemon's core is: a shared job's run continues its session in the backend and counts against its budgets.
  const core = await openCore("command", {
    config: () => config,
    env: process.env,
    log: logger,
    concurrency: 1,
    wrap: (executeJob) => async (j, run) => {
      current = run.cancel;
      if (interrupted) run.cancel.cancel(CANCELLED_BY_USER);
      try {
        const outcome = await executeJob(j, run);
        // The runner names only the cancels it caused; this one the user caused.
        return interrupted && outcome.status === "cancelled" ? { ...outcome, error: CANCELLED_BY_USER } : outcome;
      } finally {
        current = undefined;
      }
    },
  }).catch(async (err: unknown) => {
    await release();
    throw err;
  });
  const { jobs, runner, outbox } = core;
  const runtime = core.runtime();
  try {
    runtime.warnings.forEach((warning) => process.stderr.write(`countd: warning: ${warning}\n`));
    // Only the job asked for is reported (notRunnable): other files' problems are the daemon's to log.
    const { problems } = await jobs.load({ log: false });
    const job = jobs.get(name);
    if (!job) throw await notRunnable(name, config.paths.jobs, jobs.all(), problems);
    const ours = (sessionId: string) => jobOfSession(sessionId) === name;
    const stopPrinting = printToolCalls(runtime.events, ours);
    let last = "";
    runtime.events.on("answer.chunk", (e) => {
      if (!ours(e.sessionId)) return;
      process.stdout.write(e.text);
      last = e.text;
    });
    // Ctrl-C cancels the run in flight, not through runner.shutdown, which would record it as
    // stopped by countd; with none in flight (waiting out a retry backoff) shutdown ends the wait.
    // A second Ctrl-C exits at once.
    const onSigint = () => {
      if (interrupted) process.exit(EXIT.interrupted);
      interrupted = true;
      if (current) current.cancel(CANCELLED_BY_USER);
      else void runner.shutdown(0);
    };
    process.on("SIGINT", onSigint);
    try {
      const record = (await runner.request({ job: name, reason: "manual", scheduledAt: new Date() }).ended).record;
      if (last && !last.endsWith("\n")) process.stdout.write("\n");
      await outbox.runDue();
      const prefix = `${name}.${record.id}.`;
      const { pending, dead } = await outbox.list();
      const targets = [...job.deliver, ...job.onFailure];
      const open = (entries: readonly OutboxEntry[], state: "queued" | "failed") =>
        entries
          .filter((entry) => entry.id.startsWith(prefix))
          .map((entry) => ({
            id: entry.id,
            to: describeTarget(entry.target),
            state: entry.held !== undefined && state === "queued" ? ("held" as const) : state,
            ...(entry.lastError ? { error: entry.lastError } : {}),
          }));
      const delivered = (await outbox.deliveredIds(prefix)).map(({ id }) => ({
        id,
        to: deliveredTo(id, targets),
        state: "delivered" as const,
      }));
      // In the job file's order, as its reader expects them.
      const all = [...delivered, ...open(pending, "queued"), ...open(dead, "failed")].sort(
        (a, b) => targetIndex(a.id, targets) - targetIndex(b.id, targets),
      );
      const approval =
        record.status === "waiting" ? (await core.approvals.desk.list()).find((a) => a.job === name && a.run === record.id) : undefined;
      reportRun({ ...record, ...(approval ? { approval: approval.id } : {}) }, all);
      return exitForStatus(record.status);
    } finally {
      process.off("SIGINT", onSigint);
      stopPrinting();
      await runner.shutdown(0);
    }
  } finally {
    await core.close();
    await release();
  }
}
