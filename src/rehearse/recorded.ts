import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { canonical } from "../agent/breaker.js";
import type { RecordedCalls, ToolOutcome } from "../agent/loop.js";
import type { DeliveryMessage } from "../delivery/message.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import type { ChatMessage, LLMProvider, StreamEvent, ToolCall, Usage } from "../providers/types.js";
import type { JournalEntry } from "../store/journal-entries.js";
import { JOURNAL_DIR, readJournalFile } from "../store/run-journal.js";
import type { RunReason } from "../store/run-record.js";
import { HEARTBEAT_RESPOND } from "../tools/heartbeat.js";

type Entry<K extends JournalEntry["kind"]> = Extract<JournalEntry, { kind: K }>;

/** A past run as its journal recorded it: what a replay serves and what it compares with. */
export interface Recording {
  job: string;
  runId: string;
  reason: RunReason;
  scheduledAt: string;
  /** When the run started and ended (its fire's and its end's entries). */
  startedAt: string;
  finishedAt: string;
  files?: string[];
  payload?: string;
  /** The prompt and the system prompt the model was given. */
  prompt: string;
  system?: string;
  status: string;
  error?: string;
  usage: Usage;
  cost: number | null;
  /** The answer as delivered; undefined in a journal written before answers were kept. */
  answer?: string;
  llm: Entry<"llm">[];
  tools: Entry<"tool">[];
  /** What each queued delivery carried, and to which target; undefined in a journal written before messages were kept. */
  deliveries?: Array<{ ids: string[]; message: DeliveryMessage; targets?: DeliveryTarget[] }>;
  /** The subagents' tasks, by their id. */
  tasks: Map<string, string>;
}

/** Why a run cannot be replayed: its journal is missing, incomplete or from a later countd. */
export class NotReplayable extends Error {}

/** Finds a run's journal in the state directory: in `job`'s folder, or in whichever job's holds the id. */
export async function readRecording(state: string, runId: string, job?: string): Promise<Recording> {
  const jobs = job !== undefined ? [job] : await journalJobs(state);
  const found: Array<{ job: string; journal: NonNullable<Awaited<ReturnType<typeof readJournalFile>>> }> = [];
  for (const name of jobs) {
    const journal = await readJournalFile(state, name, runId);
    if (journal) found.push({ job: name, journal });
  }
  if (found.length === 0)
    throw new NotReplayable(
      `no journal of a run "${runId}"${job !== undefined ? ` of job "${job}"` : ""} in ${join(state, JOURNAL_DIR)} (countd history lists the runs)`,
    );
  if (found.length > 1)
    throw new NotReplayable(`run id "${runId}" is in several jobs (${found.map((f) => f.job).join(", ")}): add --of <job>`);
  const { journal } = found[0]!;
  if (journal.problems.length > 0) throw new NotReplayable(`the journal of run ${runId} is damaged: ${journal.problems.join("; ")}`);
  return recordingOf(journal.entries, journal.blobs, runId);
}

async function journalJobs(state: string): Promise<string[]> {
  try {
    return (await readdir(join(state, JOURNAL_DIR), { withFileTypes: true }))
      .filter((e) => e.isDirectory() && e.name !== "blobs")
      .map((e) => e.name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

function recordingOf(entries: JournalEntry[], blobs: Map<string, string>, runId: string): Recording {
  const fire = entries.find((e): e is Entry<"fire"> => e.kind === "fire");
  const end = entries.find((e): e is Entry<"end"> => e.kind === "end");
  const prompt = entries.find((e): e is Entry<"prompt"> => e.kind === "prompt" && e.sub === undefined);
  if (!fire || !end) throw new NotReplayable(`run ${runId} has not ended: its journal has no ${fire ? "end" : "fire"} entry`);
  if (!prompt || !blobs.has(prompt.user)) throw new NotReplayable(`the journal of run ${runId} holds no prompt`);
  const delivery = entries.find((e): e is Entry<"delivery"> => e.kind === "delivery");
  return {
    job: fire.job,
    runId,
    reason: fire.reason as RunReason,
    scheduledAt: fire.scheduled_at,
    startedAt: fire.at,
    finishedAt: end.at,
    ...(fire.files ? { files: fire.files } : {}),
    ...(fire.payload !== undefined ? { payload: fire.payload } : {}),
    prompt: blobs.get(prompt.user)!,
    ...(prompt.system && blobs.has(prompt.system) ? { system: blobs.get(prompt.system)! } : {}),
    status: end.status,
    ...(end.error !== undefined ? { error: end.error } : {}),
    usage: end.usage,
    cost: end.cost ?? null,
    ...(end.answer !== undefined ? { answer: end.answer } : {}),
    llm: entries.filter((e): e is Entry<"llm"> => e.kind === "llm" && e.request.purpose !== "summary"),
    tools: entries.filter((e): e is Entry<"tool"> => e.kind === "tool"),
    ...(delivery?.messages
      ? {
          deliveries: delivery.messages.map(({ ids, message, targets }) => ({
            ids,
            message: message as DeliveryMessage,
            ...(targets ? { targets: targets as DeliveryTarget[] } : {}),
          })),
        }
      : delivery
        ? {}
        : { deliveries: [] }),
    tasks: new Map(entries.filter((e): e is Entry<"subagent"> => e.kind === "subagent").map((e) => [e.sub, e.task])),
  };
}

/** The message a conversation answers: the prompt of a run, the task of a subagent. */
function conversationOf(messages: readonly ChatMessage[]): string {
  const user = [...messages].reverse().find((m) => m.role === "user");
  if (!user) return "";
  return typeof user.content === "string" ? user.content : user.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/**
 * The model as the run heard it: each call is answered with the response its journal recorded,
 * in order, for the run and for each subagent (told apart by the message they answer). A call
 * beyond what was recorded fails: the replay then differs, and says so.
 */
export function recordedProvider(recording: Recording, name: string): { provider: LLMProvider; unused(): number } {
  const queues = new Map<string, Entry<"llm">[]>();
  for (const call of recording.llm) {
    const key = call.sub === undefined ? recording.prompt : (recording.tasks.get(call.sub) ?? "");
    queues.set(key, [...(queues.get(key) ?? []), call]);
  }
  return {
    // A subagent's responses go unasked when its spawn call is served whole: only the run's own count.
    unused: () => queues.get(recording.prompt)?.length ?? 0,
    provider: {
      name,
      async *chatStream(messages): AsyncGenerator<StreamEvent> {
        const recorded = queues.get(conversationOf(messages))?.shift();
        if (!recorded) throw new Error("the journal holds no further LLM response for this call");
        const { response } = recorded;
        if (response.reasoning) yield { type: "reasoning", text: response.reasoning };
        if (response.text) yield { type: "text", text: response.text };
        for (const call of response.tool_calls) yield { type: "tool_call", call: toolCallOf(call) };
        yield { type: "usage", usage: response.usage };
        if (response.error !== undefined) throw new Error(response.error);
        yield {
          type: "finish",
          reason: response.finish_reason as Extract<StreamEvent, { type: "finish" }>["reason"],
          raw: response.finish_reason,
        };
      },
    },
  };
}

function toolCallOf(call: { id: string; name: string; arguments: unknown }): ToolCall {
  if (typeof call.arguments === "string") return { id: call.id, name: call.name, arguments: null, rawArguments: call.arguments };
  const args = (call.arguments ?? {}) as Record<string, unknown>;
  return { id: call.id, name: call.name, arguments: args, rawArguments: JSON.stringify(args) };
}

/**
 * The recorded tool results of a run, each served once to a call with the same tool name and
 * arguments, in the order they were recorded. A call with none: refused when `recordedOnly` (a
 * replay always is), else run. The heartbeat's reply tool always runs: it only keeps the reply,
 * which the check-in is made of.
 */
export function recordedCalls(
  recording: Recording,
  opts: { recordedOnly: boolean; runId: string },
): RecordedCalls & {
  served(): number;
  ran(): string[];
} {
  const queues = new Map<string, ToolOutcome[]>();
  for (const tool of recording.tools) {
    if (tool.attempts === 0) continue;
    const key = `${tool.name} ${canonical(tool.arguments)}`;
    const outcome = { content: tool.result, isError: tool.is_error, attempts: tool.attempts, durationMs: tool.duration_ms };
    queues.set(key, [...(queues.get(key) ?? []), outcome]);
  }
  let served = 0;
  const ran: string[] = [];
  return {
    served: () => served,
    ran: () => ran,
    serve(call) {
      if (call.name === HEARTBEAT_RESPOND) return undefined;
      const outcome = queues.get(`${call.name} ${canonical(call.arguments ?? call.rawArguments)}`)?.shift();
      if (outcome) {
        served++;
        return outcome;
      }
      if (opts.recordedOnly) return { refused: `run ${opts.runId} recorded no result for this call and only recorded results are served` };
      ran.push(call.name);
      return undefined;
    },
  };
}
