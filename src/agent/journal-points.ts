import type { CountdEvents } from "../events.js";
import type { ChatMessage, LLMProvider, ToolCall, ToolDefinition } from "../providers/types.js";
import type { JournalWriter } from "../store/journal-entries.js";
import { Iteration } from "./iteration.js";

/*
 * The journal entries the agent loop writes at its record points (store/journal-entries.ts): the
 * prompt it was given, each LLM call with its whole response, each tool call with its whole result.
 */

/** The system prompt and the user's message, each kept once per content. */
export function journalPrompt(journal: JournalWriter | undefined, messages: readonly ChatMessage[], message: string): void {
  if (!journal) return;
  const system = messages[0]?.role === "system" ? messages[0].content : undefined;
  journal.write({ kind: "prompt", ...(system ? { system: journal.blob(system) } : {}), user: journal.blob(message) });
}

/**
 * The provider a run's history summary calls through: the call is journalled as any LLM call is,
 * marked as the summary, since it is priced into the run's spending.
 */
export function journaledSummaries(provider: LLMProvider, journal: JournalWriter | undefined, unpriced: boolean): LLMProvider {
  if (!journal) return provider;
  return {
    name: provider.name,
    async *chatStream(messages, tools, options) {
      const iteration = new Iteration(unpriced);
      const started = performance.now();
      let failure: unknown;
      try {
        for await (const event of provider.chatStream(messages, tools, options)) {
          iteration.accept(event);
          yield event;
        }
      } catch (err) {
        iteration.fail((failure = err));
        throw err;
      } finally {
        const request = { ...options, tools, messages: messages.length, purpose: "summary" as const };
        const report = iteration.report(
          "",
          options.model,
          performance.now() - started,
          failure === undefined && options.signal?.aborted === true,
        );
        journalCall(journal, request, iteration, report);
      }
    },
  };
}

/** One LLM call: what was asked of which model, and all it answered (or why it failed). */
export function journalCall(
  journal: JournalWriter | undefined,
  request: {
    model: string;
    temperature: number;
    maxTokens: number;
    tools: readonly ToolDefinition[];
    messages: number;
    purpose?: "summary";
  },
  iteration: Iteration,
  report: CountdEvents["llm.finished"],
): void {
  if (!journal) return;
  const reasoning = iteration.reasoning?.text;
  journal.write({
    kind: "llm",
    request: {
      model: request.model,
      temperature: request.temperature,
      max_tokens: request.maxTokens,
      tools: request.tools.map((tool) => tool.function.name),
      messages: request.messages,
      ...(request.purpose ? { purpose: request.purpose } : {}),
    },
    response: {
      text: iteration.text,
      tool_calls: iteration.calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments ?? call.rawArguments })),
      ...(reasoning ? { reasoning } : {}),
      finish_reason: report.finishReason,
      usage: { ...report.usage },
      cost: report.cost,
      attempts: report.attempts,
      duration_ms: report.durationMs,
      ...(report.error !== undefined ? { error: report.error } : {}),
    },
  });
}

/** One tool call as the model was answered: run, failed, or not run at all (attempts 0). */
export function journalTool(
  journal: JournalWriter | undefined,
  call: ToolCall,
  outcome: { content: string; isError: boolean; attempts: number; durationMs: number },
  server: string | undefined,
): void {
  journal?.write({
    kind: "tool",
    call_id: call.id,
    name: call.name,
    ...(server !== undefined ? { server } : {}),
    arguments: call.arguments ?? call.rawArguments,
    result: outcome.content,
    is_error: outcome.isError,
    attempts: outcome.attempts,
    duration_ms: outcome.durationMs,
  });
}
