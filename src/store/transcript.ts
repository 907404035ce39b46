import { createReadStream } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { localDate } from "../audit/log.js";
import { emptyUsage, type ChatMessage, type Usage } from "../providers/types.js";
import { sessionFileName } from "../sessions/file-names.js";
import type { RunMarker } from "../sessions/store.js";
import { readJsonLines } from "./jsonl.js";
import type { RunRecord } from "./run-record.js";
import type { Transcript, TranscriptStep } from "./transcript-types.js";

export type { Transcript, TranscriptStep, RunDelivery } from "./transcript-types.js";

/** An audit line of the kinds a transcript uses (audit/log.ts writes them). */
interface AuditLine {
  kind: "tool" | "llm" | string;
  time: string;
  session: string;
  callId?: string;
  tool?: string;
  arguments?: unknown;
  status?: string;
  attempts?: number;
  durationMs?: number;
  result?: string;
  error?: string;
  model?: string;
  usage?: Usage;
  cost?: number | null;
  finishReason?: string;
}

/**
 * Puts a run's transcript together from the two places that hold it: the session file (every
 * message, whole tool results) and the day's audit log (each LLM call's model, tokens and time, each
 * tool call's duration and attempts). A shared session holds many runs: the marker line each run
 * writes before its messages picks out this run's.
 */
export async function readTranscript(paths: { state: string; logs: string }, run: RunRecord): Promise<Transcript> {
  const [messages, audit] = await Promise.all([
    runMessages(join(paths.state, "sessions", sessionFileName(run.sessionId)), run),
    auditLines(paths.logs, run),
  ]);
  const transcript = stepsOf(messages ?? [], audit);
  // A run in progress writes its messages when it ends: nothing is missing yet.
  if (run.status === "running") return transcript;
  if (messages === undefined && audit.length === 0 && run.status !== "skipped" && run.status !== "cancelled") {
    transcript.incomplete =
      "no session file or audit lines were found for this run: removed by retention, or the run never reached the model";
  } else if (messages === undefined && run.iterations > 0) {
    transcript.incomplete = "the session file is gone (removed by retention): tool results are shown as the audit log cut them";
  }
  return transcript;
}

/** This run's messages from its session file; undefined when the file holds none of them. */
async function runMessages(file: string, run: RunRecord): Promise<ChatMessage[] | undefined> {
  const lines = await readJsonLines(file);
  if (lines.length === 0) return undefined;
  const marked = lines.some((line) => isMarker(line));
  // A file without markers was written before they were, or is an isolated run's own session.
  if (!marked) return run.sessionId.endsWith(`:${run.id}`) ? lines.filter(isMessage) : undefined;
  const mine: ChatMessage[] = [];
  let inRun = false;
  for (const line of lines) {
    if (isMarker(line)) inRun = line.run === run.id;
    else if (inRun && isMessage(line)) mine.push(line);
  }
  return mine.length > 0 ? mine : undefined;
}

/**
 * The audit lines of the run's session written while it ran, oldest first. A line is stamped as the
 * loop reports the call (not when the file is written), so a run's lines lie between its record's
 * start and end; no slack beyond them, which would take in the lines of the run before or after
 * it in a shared session.
 */
async function auditLines(dir: string, run: RunRecord): Promise<AuditLine[]> {
  const from = Date.parse(run.startedAt);
  const to = Date.parse(run.finishedAt ?? new Date().toISOString());
  const needle = `"session":${JSON.stringify(run.sessionId)}`;
  const found: AuditLine[] = [];
  for (const day of localDays(from, to)) {
    const file = join(dir, `audit-${day}.jsonl`);
    try {
      // Read line by line: a day's audit file can be large, and only a few of its lines are wanted.
      const lines = createInterface({ input: createReadStream(file, "utf8"), crlfDelay: Infinity });
      for await (const text of lines) {
        if (!text.includes(needle)) continue;
        const line = parse(text);
        if (!line || line.session !== run.sessionId) continue;
        const at = Date.parse(line.time);
        if (at >= from && at <= to) found.push(line);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  return found;
}

/** The steps in the order they happened: each LLM call, then what it said and the tools it called. */
function stepsOf(messages: ChatMessage[], audit: AuditLine[]): Transcript {
  const llm = audit.filter((line) => line.kind === "llm");
  const tools = new Map(audit.filter((line) => line.kind === "tool" && line.callId).map((line) => [line.callId!, line]));
  const results = new Map(messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m] as const] : [])));
  const transcript: Transcript = { steps: [] };
  const prompt = messages.find((m) => m.role === "user");
  if (prompt) transcript.prompt = textOf(prompt.content);
  let call = 0;
  const seen = new Set<string>();
  for (const message of messages) {
    if (message.role !== "assistant") continue;
    // Calls that failed before an answer (an error, a retry) have no message of their own.
    while (call < llm.length && llm[call]!.error !== undefined) transcript.steps.push(llmStep(llm[call++]!));
    if (call < llm.length) transcript.steps.push(llmStep(llm[call++]!));
    if (message.content) transcript.steps.push({ kind: "text", text: message.content });
    for (const toolCall of message.toolCalls ?? []) {
      seen.add(toolCall.id);
      const result = results.get(toolCall.id);
      const audited = tools.get(toolCall.id);
      transcript.steps.push({
        kind: "tool",
        call_id: toolCall.id,
        name: toolCall.name,
        arguments: toolCall.arguments ?? toolCall.rawArguments,
        ...(result ? { result: result.content } : audited?.result !== undefined ? { result: audited.result } : {}),
        ...(result?.isError || audited?.status === "error" ? { is_error: true } : {}),
        ...(audited?.durationMs !== undefined ? { duration_ms: Math.round(audited.durationMs) } : {}),
        ...(audited?.attempts !== undefined ? { attempts: audited.attempts } : {}),
      });
    }
  }
  while (call < llm.length) transcript.steps.push(llmStep(llm[call++]!));
  // Without the session file, the audit lines alone still say which tools ran.
  for (const [callId, line] of tools) {
    if (seen.has(callId)) continue;
    transcript.steps.push({
      kind: "tool",
      call_id: callId,
      name: line.tool ?? "?",
      arguments: line.arguments,
      ...(line.result !== undefined ? { result: line.result } : {}),
      ...(line.status === "error" ? { is_error: true } : {}),
      ...(line.durationMs !== undefined ? { duration_ms: Math.round(line.durationMs) } : {}),
      ...(line.attempts !== undefined ? { attempts: line.attempts } : {}),
    });
  }
  return transcript;
}

function llmStep(line: AuditLine): TranscriptStep {
  return {
    kind: "llm",
    model: line.model ?? "?",
    usage: { ...emptyUsage(), ...line.usage },
    ...(line.cost !== undefined ? { cost: line.cost } : {}),
    duration_ms: Math.round(line.durationMs ?? 0),
    ...(line.finishReason ? { finish_reason: line.finishReason } : {}),
    ...(line.error ? { error: line.error } : {}),
  };
}

function textOf(content: Extract<ChatMessage, { role: "user" }>["content"]): string {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : "[image]")).join("\n");
}

/** The local dates (YYYY-MM-DD, as the audit files are named) from `from` to `to`. */
function localDays(from: number, to: number): string[] {
  const days: string[] = [];
  const day = new Date(from);
  day.setHours(0, 0, 0, 0);
  for (; day.getTime() <= to; day.setDate(day.getDate() + 1)) {
    days.push(localDate(day));
  }
  return days;
}

function parse(text: string): AuditLine | undefined {
  try {
    return JSON.parse(text) as AuditLine;
  } catch {
    return undefined;
  }
}

function isMarker(line: unknown): line is RunMarker {
  return typeof line === "object" && line !== null && typeof (line as RunMarker).run === "string" && !("role" in line);
}

function isMessage(line: unknown): line is ChatMessage {
  return typeof line === "object" && line !== null && typeof (line as { role?: unknown }).role === "string";
}
