import { Redactor } from "../audit/redact.js";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import type { RunView, Transcript } from "../console/protocol.js";
import { deliveryView } from "../console/views.js";
import { OutboxStore } from "../store/outbox-store.js";
import type { RunRecord } from "../store/run-record.js";
import { openState } from "../backend/open.js";
import { findDaemon } from "./control.js";
import { EXIT } from "./output.js";
import { formatRun } from "./transcript-format.js";
import { jobContext } from "../jobs/context.js";
import { loadJobsDir } from "../jobs/load.js";
import { zoneOf } from "../jobs/zones.js";
import { rehearsalRuns } from "../rehearse/runs.js";

/**
 * `countd show <run-id>`: one run's transcript. The running daemon answers it (with the live
 * state of a run in progress); without one it is put together here from the same files.
 */
export async function showRun(runId: string, opts: { config?: string; job?: string; json?: boolean }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await findDaemon(config.paths.state);
  const query = opts.job !== undefined ? `?job=${encodeURIComponent(opts.job)}` : "";
  const view = daemon
    ? await daemon.call<RunView>("GET", `/api/runs/${encodeURIComponent(runId)}${query}`)
    : await readRunView(config, runId, opts.job);
  process.stdout.write(opts.json ? `${JSON.stringify(view, null, 2)}\n` : formatRun(view, !daemon));
  return EXIT.ok;
}

/** What GET /api/runs/<id> answers, read from the state directory; delivered ids are not known offline, so only pending and dead deliveries are listed. */
async function readRunView(config: Config, runId: string, job: string | undefined): Promise<RunView> {
  const { state, backend, close } = await openState(config);
  let run: RunRecord;
  let transcript: Transcript;
  try {
    const candidates = await (job !== undefined ? state.runs(job) : state.allRuns());
    let found = candidates.filter((candidate) => candidate.id === runId);
    // A rehearsal's, a replay's or a fork's run is in no history, only in its rehearsal's folder.
    if (found.length === 0) found = await rehearsalRuns(config.paths.state, runId, job);
    if (found.length === 0)
      throw new Error(`no run with id "${runId}"${job !== undefined ? ` in job "${job}"` : ""} (countd history lists the runs)`);
    if (found.length > 1)
      throw new Error(`run id "${runId}" is in several jobs (${found.map((candidate) => candidate.job).join(", ")}): add --job <name>`);
    run = found[0]!;
    const transcripts = backend.transcripts();
    transcript = new Redactor(config.secrets).redactValue(await transcripts.read(run)) as Transcript;
  } finally {
    await close();
  }
  const prefix = `${run.job}.${run.id}.`;
  const outbox = await OutboxStore.read(config.paths.state, new Date());
  const deliveries = Object.values(outbox.entries)
    .filter((entry) => entry.id.startsWith(prefix))
    .map((entry) => {
      const { job: _job, run_id: _run, created_at: _created, ...view } = deliveryView(entry);
      return view;
    });
  const { jobs } = await loadJobsDir(config.paths.jobs, jobContext(config, null));
  return { run, timezone: zoneOf(config, jobs)(run.job), transcript, deliveries, running: false };
}
