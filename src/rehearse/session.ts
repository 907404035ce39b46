import { cp, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import type { RunOutcome } from "../agent/outcome.js";
import type { Config } from "../config/schema.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import { createMailer } from "../delivery/email.js";
import { EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import type { Logger } from "../log.js";
import { openPipeline, type Pipeline } from "../runner/pipeline.js";
import { runId } from "../runner/run-ids.js";
import type { FireRequest } from "../runner/types.js";
import { openRuntime, type LoopOptions, type Runtime } from "../runtime.js";
import { SessionStore, type SessionHistory } from "../sessions/store.js";
import { JOURNAL_DIR } from "../store/run-journal.js";
import { HEARTBEAT_JOB, type RunRecord } from "../store/run-record.js";
import type { SpendBook, SpendLedger } from "../store/spend-ledger.js";
import { checkInPrompt, runCheckIn } from "../triggers/check-ins.js";
import { CaptureOutbox, renderDelivery, type CapturedDelivery } from "./capture.js";

/** Where rehearsals, replays and forks keep what they made, one folder each, under the state directory. */
export const REHEARSALS_DIR = "rehearsals";
/** The copy of the workspace a rehearsal's tools act on, inside its folder; removed when it ends. */
const WORKSPACE_COPY = "workspace";

export type RehearsalKind = "rehearsal" | "replay" | "fork";

/** What a rehearsal folder's rehearsal.json says: the run's record, its answer and what it would have sent. */
export interface RehearsalSummary {
  id: string;
  kind: RehearsalKind;
  job: string;
  run: RunRecord;
  answer: string;
  deliveries: CapturedDelivery[];
}

/** The summary's file in a rehearsal's folder; a replay or a fork adds replay.json beside it. */
export const SUMMARY_FILE = "rehearsal.json";

/** What a rehearsal run is given beyond its job: the instant it reads, the fire's data, and a replay's or fork's loop. */
export interface RehearsalFire {
  at?: Date;
  files?: string[];
  payload?: string;
  /** The prompt to run instead of the job's: a replay's recorded one, a fork's. */
  prompt?: string;
  loop?: Pick<LoopOptions, "provider" | "recorded" | "system">;
  /** Spend nothing into the ledger: a replay's calls were paid for by the run it replays. */
  unmetered?: boolean;
  /** How a replay gives each delivery the id and times of the run it replays. */
  shape?: ConstructorParameters<typeof CaptureOutbox>[2];
}

/** How a rehearsal ended: its record (never saved in the job's history), what the run returned, and what it would have sent. */
export interface RehearsalEnd {
  id: string;
  folder: string;
  record: RunRecord;
  outcome?: RunOutcome;
  deliveries: CapturedDelivery[];
  /** Each delivery's target, by id. */
  targets: ReadonlyMap<string, DeliveryTarget>;
}

/** A rehearsal's id: when it started, and a random part. */
export function rehearsalId(now = new Date()): string {
  return runId(now);
}

/**
 * Runs `job` once as a rehearsal, a replay or a fork: through the same pipeline as every run (the
 * journal, the dispatcher, the loop), with nothing leaving the machine and nothing lasting. Its
 * tools act on a copy of the workspace (memory and skills are in it, so their writes go too); its
 * session history is read, never written; its record is kept out of the job's history and state,
 * its failure alerts go nowhere but the rehearsal's folder, where every delivery is rendered and
 * not sent. Its journal is the real one (reason `rehearsal`, `replay` or `fork`), and its calls
 * count in the spend ledger marked `rehearsal`, since they cost real money.
 */
export async function rehearse(
  config: Config,
  env: NodeJS.ProcessEnv,
  log: Logger,
  kind: RehearsalKind,
  job: Job,
  fire: RehearsalFire,
  hooks: { events?: EventBus; id?: string } = {},
): Promise<RehearsalEnd> {
  const id = hooks.id ?? rehearsalId();
  const folder = join(config.paths.state, REHEARSALS_DIR, id);
  const workspace = join(folder, WORKSPACE_COPY);
  await mkdir(folder, { recursive: true, mode: 0o700 });
  await copyWorkspace(config.paths.workspace, workspace);
  const tried: Config = { ...config, paths: { ...config.paths, workspace } };
  const runtime = await openRuntime(
    tried,
    env,
    hooks.events ?? new EventBus(),
    log,
    readOnlySessions(new SessionStore(config.paths.state)),
  );
  const mailer = createMailer({ smtp: config.smtp, stateDir: folder, timezone: config.timezone, attachments: config.attachments, log });
  const capture = new CaptureOutbox(
    folder,
    (entry) => renderDelivery(mailer, env, entry),
    fire.shape ?? (fire.at ? startedAt(fire.at) : undefined),
  );
  const known = new Set(await journalIds(config.paths.state, job.name));
  let pipeline: Pipeline | undefined;
  try {
    pipeline = await openPipeline({
      config: tried,
      env,
      state: { saveRun: async () => {}, knownRunIds: () => [...known] },
      runtime: () => ({ ...runtime, loop: (opts) => runtime.loop({ ...opts, ...fire.loop }) }),
      job: (name) => (name === job.name ? job : undefined),
      concurrency: 1,
      log,
      spend: (local) => (fire.unmetered ? unmetered() : marked(local)),
      outbox: async () => capture,
      wrap: (execute) => (job.name === HEARTBEAT_JOB ? checkInExecutor(execute, tried, runtime, fire) : execute),
    });
    const request: FireRequest = {
      job: job.name,
      reason: kind,
      scheduledAt: fire.at ?? new Date(),
      ...(fire.at ? { at: fire.at } : {}),
      ...(fire.files ? { files: fire.files.map((file) => inCopy(file, config.paths.workspace, workspace)) } : {}),
      ...(fire.payload !== undefined ? { payload: fire.payload } : {}),
      ...(fire.prompt !== undefined && job.name !== HEARTBEAT_JOB ? { prompt: fire.prompt } : {}),
    };
    const end = await pipeline.runner.request(request).ended;
    await pipeline.runner.shutdown(0);
    const summary: RehearsalSummary = {
      id,
      kind,
      job: job.name,
      run: end.record,
      answer: end.outcome?.answer ?? "",
      deliveries: capture.captured,
    };
    await writeFile(join(folder, SUMMARY_FILE), `${JSON.stringify(summary, null, 2)}\n`);
    return {
      id,
      folder,
      record: end.record,
      ...(end.outcome ? { outcome: end.outcome } : {}),
      deliveries: capture.captured,
      targets: capture.targets,
    };
  } finally {
    await pipeline?.close();
    mailer.close();
    await runtime.close();
    await rm(workspace, { recursive: true, force: true });
  }
}

/** The check-in a rehearsal of `@heartbeat` makes: the recorded prompt of a replay, else the heartbeat's prompt now. */
function checkInExecutor(
  execute: Parameters<NonNullable<Parameters<typeof openPipeline>[0]["wrap"]>>[0],
  config: Config,
  runtime: Runtime,
  fire: RehearsalFire,
): typeof execute {
  return async (job, run) => {
    const prompt = fire.prompt ?? (await checkInPrompt(config, runtime.memory, run.clock.at, undefined));
    const { outcome, message } = await runCheckIn(execute, job, run, prompt, runtime.redactor);
    return { ...outcome, answer: message };
  };
}

/** A rehearsal at `--at` delivers as a run started then would: a subject's {{date}} reads the same instant as its prompt. */
function startedAt(at: Date): NonNullable<RehearsalFire["shape"]> {
  return (runKey, message) => {
    const finishedAt = new Date(at.getTime() + message.run.durationMs).toISOString();
    return { runKey, message: { ...message, run: { ...message.run, startedAt: at.toISOString(), finishedAt } } };
  };
}

/** A file of the workspace as the rehearsal's tools reach it: at the same place in the copy. */
function inCopy(file: string, workspace: string, copy: string): string {
  const inside = relative(workspace, resolve(file));
  return inside.startsWith("..") || isAbsolute(inside) ? file : join(copy, inside);
}

/** The workspace as it is, to act on; an absent workspace gives an empty one. */
async function copyWorkspace(from: string, to: string): Promise<void> {
  try {
    await cp(from, to, { recursive: true, verbatimSymlinks: true, errorOnExist: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  await mkdir(to, { recursive: true });
}

/** Sessions as they are, read and never written: a rehearsal must not add to the conversation its job continues. */
function readOnlySessions(sessions: SessionHistory): SessionHistory {
  return { load: (id) => sessions.load(id), append: async () => {}, dropOldest: async () => {} };
}

/** The ids the job's journals already use, so a rehearsal's run does not take one. */
async function journalIds(state: string, job: string): Promise<string[]> {
  try {
    return (await readdir(join(state, JOURNAL_DIR, job))).map((name) => name.replace(/\.jsonl$/, ""));
  } catch {
    return [];
  }
}

/** The ledger with each call marked: a rehearsal's and a fork's calls cost real money, shown apart. */
function marked(local: SpendLedger): SpendBook {
  return {
    record: (line) => local.record({ ...line, mark: "rehearsal" }),
    today: (timeZone, job) => local.today(timeZone, job),
    flush: () => local.flush(),
  };
}

/** A replay's calls are served from its journal: they were paid for once, by the run it replays. */
function unmetered(): SpendBook {
  return { record: () => {}, today: () => ({ date: "", cost: 0, tokens: 0 }), flush: async () => {} };
}
