import type { JournalEntry } from "./journal-entries.js";
import { readJournalFile, type JournalReading, type ReadJournal } from "./run-journal.js";
import type { RunRecord } from "./run-record.js";
import type { Transcript, TranscriptStep } from "./transcript-types.js";

export type { Transcript, TranscriptStep, RunDelivery } from "./transcript-types.js";

/** A run's transcript from its journal in the state directory (store/run-journal.ts), and nothing else. */
export async function readTranscript(state: string, run: RunRecord, reading: JournalReading = {}): Promise<Transcript> {
  return transcriptOf(run, await readJournalFile(state, run.job, run.id, reading));
}

/**
 * The steps of a journal in the order they happened: each LLM call, then what it said, then the
 * tools it called with their whole results; a subagent's steps among them, marked with its id.
 */
export function transcriptOf(run: RunRecord, journal: ReadJournal | undefined): Transcript {
  // A fire recorded without running (skipped, cancelled while it waited) has no journal, and needs
  // none; a run in progress may not have written yet.
  if (!journal) {
    if (run.status === "skipped" || run.status === "running" || (run.status === "cancelled" && run.iterations === 0)) return { steps: [] };
    return {
      steps: [],
      incomplete: "no journal was found for this run: removed by retention (retention.sessions), or the run never started",
    };
  }
  const transcript: Transcript = { steps: [] };
  for (const entry of journal.entries) {
    if (entry.kind === "prompt" && entry.sub === undefined) {
      const prompt = journal.blobs.get(entry.user);
      if (prompt !== undefined) transcript.prompt = prompt;
    }
    if (entry.kind === "end" && entry.output !== undefined) transcript.output = entry.output;
    transcript.steps.push(...stepsOf(entry));
  }
  const problems = [...journal.problems];
  // A waiting run's journal goes on once it is answered.
  if (run.status !== "running" && run.status !== "waiting" && !journal.entries.some((entry) => entry.kind === "end")) {
    problems.push("the journal ends before the run did (countd stopped, or a write failed)");
  }
  if (problems.length > 0) transcript.incomplete = problems.join("; ");
  return transcript;
}

function stepsOf(entry: JournalEntry): TranscriptStep[] {
  const sub = entry.sub !== undefined ? { subagent: entry.sub } : {};
  switch (entry.kind) {
    case "llm": {
      const { response } = entry;
      const steps: TranscriptStep[] = [
        {
          kind: "llm",
          model: entry.request.model,
          usage: response.usage,
          cost: response.cost,
          duration_ms: Math.round(response.duration_ms),
          finish_reason: response.finish_reason,
          ...(response.error !== undefined ? { error: response.error } : {}),
          ...(entry.request.purpose ? { purpose: entry.request.purpose } : {}),
          ...sub,
        },
      ];
      // A summary's text went to MEMORY.md, not to the answer: the journal keeps it, the steps do not show it as said.
      if (response.text && entry.request.purpose === undefined) steps.push({ kind: "text", text: response.text, ...sub });
      return steps;
    }
    case "tool":
      return [
        {
          kind: "tool",
          call_id: entry.call_id,
          name: entry.name,
          arguments: entry.arguments,
          result: entry.result,
          ...(entry.is_error ? { is_error: true } : {}),
          // A call answered as not run (a limit, a cancel) took no time and no attempt.
          ...(entry.attempts > 0 ? { duration_ms: Math.round(entry.duration_ms), attempts: entry.attempts } : {}),
          ...sub,
        },
      ];
    case "note":
      return [{ kind: "text", text: entry.text, ...sub }];
    case "subagent":
      return [{ kind: "subagent", id: entry.sub, task: entry.task }];
    case "repair":
      return [{ kind: "repair", errors: entry.errors, ...sub }];
    case "verify": {
      const { index, check, what, passed, reason } = entry;
      return [{ kind: "verify", index, check, what, passed, ...(reason !== undefined ? { reason } : {}) }];
    }
    case "approval": {
      const { v: _v, at: _at, sub: _sub, ...step } = entry;
      return [step];
    }
    default:
      return [];
  }
}
