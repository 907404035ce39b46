import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createTwoFilesPatch } from "diff";
import type { Config } from "../config/schema.js";
import { createMailer } from "../delivery/email.js";
import type { DeliveryMessage } from "../delivery/message.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import type { EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import type { Logger } from "../log.js";
import type { Usage } from "../providers/types.js";
import { renderDelivery } from "./capture.js";
import { readRecording, recordedCalls, recordedProvider, type Recording } from "./recorded.js";
import { rehearse, type RehearsalEnd, type RehearsalFire } from "./session.js";

/** What a fork changes of the run it repeats; none of them: a replay. */
export interface ForkChanges {
  model?: string;
  /** The prompt to run instead of the recorded one. */
  prompt?: string;
  /** An edited job file's job: its prompt is rendered at the recorded instant, its tools and limits used. */
  job?: Job;
  system?: string;
  /** Refuse a tool call the run recorded no result for, instead of running it on the workspace copy. */
  recordedOnly?: boolean;
}

/** One tool call in a run's sequence: its name and arguments. */
export interface CalledTool {
  name: string;
  arguments: unknown;
}

/** What `countd replay` reports, and keeps as replay.json in the rehearsal's folder. */
export interface ReplayReport {
  kind: "replay" | "fork";
  of: { job: string; run: string };
  rehearsal: string;
  /** The replay's own run id (its journal's). */
  run: string;
  status: { original: string; replayed: string };
  /** True when the answer and every delivery are the same bytes (a fork compares them too). */
  identical: boolean;
  answer: { original: string; replayed: string; diff?: string };
  deliveries: Array<{ id: string; to: string; identical: boolean; diff?: string; files: string[] }>;
  /** What the run's journal lacked for a full comparison, and calls the replay could not serve. */
  notes: string[];
  tools: { original: CalledTool[]; replayed: CalledTool[]; served: number; ran: string[] };
  spend: { original: { usage: Usage; cost: number | null }; replayed: { usage: Usage; cost: number | null } };
}

/**
 * Re-executes a recorded run. A replay serves every LLM response and tool result from the run's
 * journal (no request to the model, no tool runs) and compares what it answers and would deliver,
 * rendered with today's templates, with what the run did. A fork calls the model anew with its
 * changes; a tool call matching a recorded one gets the recorded result, any other runs on the
 * workspace copy (or is refused, `recordedOnly`).
 */
export async function replay(
  config: Config,
  env: NodeJS.ProcessEnv,
  log: Logger,
  runId: string,
  opts: { jobName?: string; jobOf: (name: string) => Promise<Job>; changes?: ForkChanges; events?: EventBus; id?: string },
): Promise<ReplayReport> {
  const recording = await readRecording(config.paths.state, runId, opts.jobName);
  const changes = opts.changes ?? {};
  const fork = changes.model !== undefined || changes.prompt !== undefined || changes.job !== undefined || changes.system !== undefined;
  const base = changes.job ?? (await opts.jobOf(recording.job));
  const job = changes.model !== undefined ? { ...base, overrides: { ...base.overrides, model: changes.model } } : base;
  const calls = recordedCalls(recording, { recordedOnly: !fork || changes.recordedOnly === true, runId });
  const served = fork ? undefined : recordedProvider(recording, "journal");
  const at = new Date(recording.startedAt);
  const fire: RehearsalFire = {
    at,
    ...(recording.files ? { files: recording.files } : {}),
    ...(recording.payload !== undefined ? { payload: recording.payload } : {}),
    // An edited job's own prompt, rendered at the recorded instant; else the prompt given, or the one recorded.
    ...(changes.job === undefined
      ? { prompt: changes.prompt ?? recording.prompt }
      : changes.prompt !== undefined
        ? { prompt: changes.prompt }
        : {}),
    loop: {
      recorded: calls,
      ...(served ? { provider: served.provider } : {}),
      ...(fork && (changes.system !== undefined || recording.system !== undefined) ? { system: changes.system ?? recording.system! } : {}),
    },
    unmetered: !fork,
    shape: asRecorded(recording, fork),
  };
  const end = await rehearse(config, env, log, fork ? "fork" : "replay", job, fire, {
    ...(opts.events ? { events: opts.events } : {}),
    ...(opts.id !== undefined ? { id: opts.id } : {}),
  });
  const report = await compare(config, env, log, recording, end, fork);
  const notes = [...report.notes];
  if (served && served.unused() > 0) notes.push(`${served.unused()} recorded LLM responses were not asked for`);
  const full: ReplayReport = {
    ...report,
    notes,
    tools: {
      original: mainCalls(recording),
      replayed: mainCalls(await readRecording(config.paths.state, end.record.id, recording.job).catch(() => undefined)),
      served: calls.served(),
      ran: calls.ran(),
    },
  };
  await writeFile(join(end.folder, "replay.json"), `${JSON.stringify(full, null, 2)}\n`);
  return full;
}

/**
 * A delivery of the replay carries the run id, reason and times of the run it replays (and, for a
 * replay, its recorded spending), so what differs between the two is what the run made of them.
 */
function asRecorded(recording: Recording, fork: boolean) {
  // The run's own times, as its deliveries carried them; the journal's entries are a few milliseconds off.
  const sent = recording.deliveries?.[0]?.message.run;
  const startedAt = sent?.startedAt ?? recording.startedAt;
  const finishedAt = sent?.finishedAt ?? recording.finishedAt;
  return (runKey: string, message: DeliveryMessage) => {
    const replayed = message.run.id;
    const run = {
      ...message.run,
      id: recording.runId,
      reason: recording.reason,
      startedAt,
      finishedAt,
      durationMs: Date.parse(finishedAt) - Date.parse(startedAt),
      ...(fork ? {} : { usage: sent?.usage ?? recording.usage, cost: sent?.cost ?? recording.cost }),
    };
    return { runKey: runKey.replace(`.${replayed}`, `.${recording.runId}`), message: { ...message, run } };
  };
}

function mainCalls(recording: Recording | undefined): CalledTool[] {
  return (recording?.tools ?? []).filter((tool) => tool.sub === undefined).map((tool) => ({ name: tool.name, arguments: tool.arguments }));
}

/** The answers side by side, and each delivery's files against the recorded message rendered to the same target. */
async function compare(
  config: Config,
  env: NodeJS.ProcessEnv,
  log: Logger,
  recording: Recording,
  end: RehearsalEnd,
  fork: boolean,
): Promise<Omit<ReplayReport, "tools">> {
  const notes: string[] = [];
  const replayed = end.outcome?.answer ?? "";
  const original = recording.answer ?? "";
  if (recording.answer === undefined) notes.push("the journal predates recorded answers: only the deliveries are compared");
  const answerSame = recording.answer === undefined || original === replayed;
  const deliveries: ReplayReport["deliveries"] = [];
  const originals = new Map<string, { message: DeliveryMessage; target?: DeliveryTarget }>();
  for (const { ids, message, targets } of recording.deliveries ?? [])
    ids.forEach((id, i) => originals.set(id, { message, ...(targets?.[i] ? { target: targets[i] } : {}) }));
  if (recording.deliveries === undefined) notes.push("the journal predates recorded delivery messages: deliveries are not compared");
  const mailer = createMailer({ smtp: config.smtp, stateDir: end.folder, timezone: config.timezone, attachments: config.attachments, log });
  const originalDir = join(end.folder, "original");
  const originalOf = pairedOriginals(
    end.deliveries.map((captured) => captured.id),
    [...originals.keys()],
  );
  try {
    for (const captured of end.deliveries) {
      const originalId = originalOf.get(captured.id);
      const original = originalId === undefined ? undefined : originals.get(originalId);
      const target = end.targets.get(captured.id);
      if (!original || !target) {
        if (recording.deliveries !== undefined)
          deliveries.push({
            id: captured.id,
            to: captured.to,
            identical: false,
            diff: "the original run made no such delivery",
            files: captured.files,
          });
        continue;
      }
      // The original as its run's target rendered it (today's, in a journal that kept none), under the replay's id: the files pair up by name.
      const { files } = await renderDelivery(mailer, env, {
        id: captured.id,
        target: original.target ?? target,
        message: original.message,
        workspace: config.paths.workspace,
      });
      await mkdir(originalDir, { recursive: true });
      const diffs: string[] = [];
      for (const file of files) {
        await writeFile(join(originalDir, file.name), file.bytes, { mode: 0o600 });
        const mine = await readFile(join(end.folder, "deliveries", file.name)).catch(() => undefined);
        const theirs = Buffer.from(file.bytes);
        if (!mine || !mine.equals(theirs))
          diffs.push(unified(`original/${file.name}`, `deliveries/${file.name}`, theirs.toString("utf8"), mine?.toString("utf8") ?? ""));
      }
      deliveries.push({
        id: captured.id,
        to: captured.to,
        identical: diffs.length === 0,
        ...(diffs.length > 0 ? { diff: diffs.join("\n") } : {}),
        files: captured.files,
      });
      originals.delete(originalId!);
    }
  } finally {
    mailer.close();
  }
  for (const id of originals.keys()) deliveries.push({ id, to: id, identical: false, diff: "the replay made no such delivery", files: [] });
  const identical = answerSame && recording.status === end.record.status && deliveries.every((d) => d.identical);
  return {
    kind: fork ? "fork" : "replay",
    of: { job: recording.job, run: recording.runId },
    rehearsal: end.id,
    run: end.record.id,
    status: { original: recording.status, replayed: end.record.status },
    identical,
    answer: {
      original,
      replayed,
      ...(answerSame
        ? {}
        : { diff: unified(`${recording.runId} (original)`, `${end.record.id} (${fork ? "fork" : "replay"})`, original, replayed) }),
    },
    deliveries,
    notes,
    spend: {
      original: { usage: recording.usage, cost: recording.cost },
      replayed: { usage: end.record.usage, cost: end.record.cost ?? null },
    },
  };
}

/**
 * Which original delivery each replayed one is compared with: the one with its id, else (the job
 * file's target was edited, its subject say, which changes its id) the first one left of the same
 * kind to the same host, in order.
 */
function pairedOriginals(replayed: readonly string[], originals: readonly string[]): Map<string, string> {
  const kindOf = (id: string) => id.replace(/-[0-9a-f]+$/, "");
  const left = originals.filter((id) => !replayed.includes(id));
  const pairs = new Map<string, string>();
  for (const id of replayed) {
    if (originals.includes(id)) pairs.set(id, id);
    else {
      const edited = left.find((original) => kindOf(original) === kindOf(id));
      if (edited === undefined) continue;
      pairs.set(id, edited);
      left.splice(left.indexOf(edited), 1);
    }
  }
  return pairs;
}

/** A unified diff of two texts, each ending with a newline so the last line compares like the others. */
export function unified(from: string, to: string, a: string, b: string): string {
  const line = (text: string) => (text.endsWith("\n") ? text : `${text}\n`);
  return createTwoFilesPatch(from, to, line(a), line(b), undefined, undefined, { context: 3 }).replace(/^=+\n/, "");
}
