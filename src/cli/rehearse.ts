import { readFile } from "node:fs/promises";
import { relative, resolve } from "node:path";
import { text } from "node:stream/consumers";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import { daemonLogger } from "../log.js";
import { jobOfSession } from "../runner/session-ids.js";
import { rehearsalAt } from "../rehearse/at.js";
import { jobToRehearse } from "../rehearse/job-source.js";
import { formatPreview, previewRehearsal } from "../rehearse/preview.js";
import { replay, type ForkChanges } from "../rehearse/replay.js";
import { rehearse } from "../rehearse/session.js";
import { openRuntime } from "../runtime.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { checkInPrompt } from "../triggers/check-ins.js";
import { EXIT, exitForStatus, printToolCalls, UsageError } from "./output.js";
import { formatReplay } from "./replay-format.js";

export interface RehearseOptions {
  config?: string;
  jobs?: string;
  at?: string;
  files?: string[];
  payload?: string;
  run: boolean;
}

/**
 * `countd rehearse <job>`: what a run of the job would be (next fires, prompt, tools, size,
 * price), then, unless `--no-run`, one run against the real model with nothing sent and nothing
 * kept but its journal, its spending and its rehearsal folder. Runs here, beside a daemon or not:
 * it touches nothing the daemon owns.
 */
export async function rehearseJob(which: string, opts: RehearseOptions): Promise<number> {
  const config = await loadConfig({ file: opts.config });
  const { job } = await jobToRehearse(config, which, { ...(opts.jobs !== undefined ? { jobsDir: opts.jobs } : {}) });
  const at = opts.at !== undefined ? usage(() => rehearsalAt(opts.at!, job.timezone, "--at")) : new Date();
  const files = opts.files?.map((file) => resolve(file));
  const payload =
    opts.payload === undefined ? undefined : opts.payload === "-" ? await text(process.stdin) : await readPayload(opts.payload);
  const fire = { at, ...(files ? { files } : {}), ...(payload !== undefined ? { payload } : {}) };
  const log = daemonLogger({ secrets: config.secrets, level: "warn", destination: 2 });
  const runtime = await openRuntime(config, process.env, new EventBus(), log);
  try {
    runtime.warnings.forEach((warning) => process.stderr.write(`countd: warning: ${warning}\n`));
    const prompt = job.name === HEARTBEAT_JOB ? await checkInPrompt(config, runtime.memory, at, undefined) : undefined;
    process.stdout.write(formatPreview(await previewRehearsal(runtime, job, { ...fire, ...(prompt !== undefined ? { prompt } : {}) })));
  } finally {
    await runtime.close();
  }
  if (!opts.run) return EXIT.ok;
  process.stdout.write("\nRehearsal (nothing is sent; tools act on a copy of the workspace):\n");
  const events = new EventBus();
  const stop = streamAnswer(events, job.name);
  try {
    const end = await rehearse(config, process.env, log, "rehearsal", job, fire, { events });
    const folder = relative(process.cwd(), end.folder) || ".";
    process.stdout.write("\n");
    process.stderr.write(`countd: rehearsal run ${end.record.id} ${end.record.status}${end.record.error ? `: ${end.record.error}` : ""}\n`);
    if (end.deliveries.length === 0) process.stderr.write("countd: nothing would have been sent\n");
    for (const delivery of end.deliveries)
      process.stderr.write(
        `countd: would have sent (${delivery.kind}) ${delivery.to}: ${delivery.files.map((f) => `${folder}/${f}`).join(", ")}\n`,
      );
    process.stderr.write(`countd: countd show ${end.record.id} shows its transcript; ${folder} holds what it made\n`);
    return exitForStatus(end.record.status);
  } finally {
    stop();
  }
}

export interface ReplayOptions {
  config?: string;
  of?: string;
  model?: string;
  prompt?: string;
  job?: string;
  systemPrompt?: string;
  recordedOnly?: boolean;
  json?: boolean;
}

/**
 * `countd replay <run-id>`: the run again from its journal, compared with what it did; with a
 * change (`--model`, `--prompt`, `--job`, `--system-prompt`), a fork that calls the model anew.
 * A replay exits 0 when identical and 1 when not; a fork as its run's status.
 */
export async function replayRun(runId: string, opts: ReplayOptions): Promise<number> {
  const config = await loadConfig({ file: opts.config });
  const changes: ForkChanges = {
    ...(opts.model !== undefined ? { model: opts.model } : {}),
    ...(opts.prompt !== undefined ? { prompt: await readFile(opts.prompt, "utf8") } : {}),
    ...(opts.job !== undefined ? { job: (await jobToRehearse(config, opts.job, {})).job } : {}),
    ...(opts.systemPrompt !== undefined ? { system: await readFile(opts.systemPrompt, "utf8") } : {}),
    ...(opts.recordedOnly ? { recordedOnly: true } : {}),
  };
  const log = daemonLogger({ secrets: config.secrets, level: "warn", destination: 2 });
  const events = new EventBus();
  const fork = Object.keys(changes).some((key) => key !== "recordedOnly");
  // A fork's calls as `countd run` shows them; a replay runs no tool, so it shows none.
  const stop = printToolCalls(events, () => fork && !opts.json);
  try {
    const report = await replay(config, process.env, log, runId, {
      ...(opts.of !== undefined ? { jobName: opts.of } : changes.job ? { jobName: changes.job.name } : {}),
      jobOf: (name) => jobOf(config, name),
      changes,
      events,
    });
    process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatReplay(report, config.paths.state));
    if (!fork) return report.identical ? EXIT.ok : EXIT.failure;
    return report.status.replayed === "ok" ? EXIT.ok : exitForStatus(report.status.replayed as Parameters<typeof exitForStatus>[0]);
  } finally {
    stop();
  }
}

async function jobOf(config: Config, name: string): Promise<Job> {
  return (await jobToRehearse(config, name, {})).job;
}

/** A value of an option that cannot be read is a usage error (exit 2), as commander's own are. */
function usage<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function readPayload(file: string): Promise<string> {
  return readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
    throw new UsageError(`--payload ${file}: ${err.code === "ENOENT" ? "no such file" : err.message}`);
  });
}

/** The rehearsal's answer on stdout as it comes, its tool calls on stderr, as `countd run` shows a run. */
function streamAnswer(events: EventBus, job: string): () => void {
  const ours = (sessionId: string) => jobOfSession(sessionId) === job;
  const stopTools = printToolCalls(events, ours);
  const stopText = events.on("answer.chunk", (e) => {
    if (ours(e.sessionId)) process.stdout.write(e.text);
  });
  return () => {
    stopTools();
    stopText();
  };
}
