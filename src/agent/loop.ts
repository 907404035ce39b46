import { EventBus } from "../events.js";
import {
  addCost,
  addUsage,
  emptyUsage,
  type ChatMessage,
  type LLMProvider,
  type ToolCall,
  type ToolDefinition,
  type Usage,
} from "../providers/types.js";
import { llmSummarizer, summarizeOverflow, type MemorySink } from "../sessions/overflow.js";
import type { SessionHistory } from "../sessions/store.js";
import { errorText } from "../text.js";
import type { ToolRegistry } from "../tools/registry.js";
import type { ToolHistory } from "../audit/tool-history.js";
import { CancelToken } from "./cancel.js";
import type { RunClock } from "../time.js";
import type { ContextBuilder } from "./context.js";
import type { Locale } from "./personalities.js";
import { limitNotice } from "./prompts.js";
import { Iteration } from "./iteration.js";
import { BudgetExceeded, type BudgetCheck } from "../cost/budget.js";
import { Breaker, DEFAULT_BREAKER, RunawayRun, type BreakerSettings } from "./breaker.js";
import type { JournalWriter } from "../store/journal-entries.js";
import { journalCall, journaledSummaries, journalPrompt, journalTool } from "./journal-points.js";
import { TypedAnswer } from "./typed-answer.js";
import type { OutputSpec } from "../jobs/output-schema.js";
import type { SuspendedMessage } from "../approvals/types.js";
import type { ApprovalGate } from "../approvals/gate.js";
import { runToolCall, type RecordedCalls, type ToolOutcome } from "./tool-call.js";

export type { RecordedCalls, ToolOutcome };

/** What the loop needs of the context builder: it builds the prompt and shapes every message. */
export type MessageBuilder = Pick<ContextBuilder, "buildMessages" | "addAssistantMessage" | "addToolResult">;

export interface AgentLoopOptions {
  provider: LLMProvider;
  workspace: string;
  tools: ToolRegistry;
  contextBuilder: MessageBuilder;
  sessions?: SessionHistory;
  /** Where summaries of history beyond maxHistory go (the workspace's MEMORY.md). */
  memory?: MemorySink;
  toolHistory?: Pick<ToolHistory, "record" | "flush">;
  events?: EventBus;
  model: string;
  maxIterations?: number;
  maxRetries?: number;
  retryDelayMs?: number;
  temperature?: number;
  maxTokens?: number;
  maxHistory?: number;
  locale?: Locale;
  /** Asked before every LLM call; a reached cap ends the message with status `budget`. */
  budget?: BudgetCheck;
  /** The model has no price: a call's cost is unknown even before its usage is reported. */
  unpriced?: boolean;
  /** When a message that repeats itself is ended with status `error` (`runaway: …`); false: never. Default DEFAULT_BREAKER. */
  breaker?: BreakerSettings;
  /** A replay's or a fork's recorded tool results, asked before any tool runs. */
  recorded?: RecordedCalls;
  /** The provider takes a typed answer's schema in its structured-output mode (providers/presets.ts). */
  structuredOutput?: boolean;
  /** Tool calls that wait for a person's yes (approvals/rules.ts): the rule a call matches, or undefined when it may run. */
  approvals?: ApprovalGate;
}

/** A person's answer to the call a message stopped at: it runs, it is denied (the agent is told why), or the run fails. */
export type ApprovalDecision = { approved: true } | { approved: false; reason: string } | { fail: string };

export interface ProcessOptions {
  /** History to use instead of the session's stored one. */
  context?: ChatMessage[];
  /** Image paths attached to the message. */
  media?: string[];
  channel?: string;
  cancelToken?: CancelToken;
  /** The run this message is, marked in the session file so a shared session's runs can be told apart. */
  runId?: string;
  /** A job's run: the runtime facts tell the time its prompt was filled from, in the job's zone. */
  clock?: RunClock;
  /** The run's journal: the prompt, each LLM call and each tool call are recorded in it whole. */
  journal?: JournalWriter;
  /** Typed output: the answer must be JSON valid against this schema, repaired or failed (typed-answer.ts). */
  output?: OutputSpec;
  /**
   * A job's run, which can stop at a call that needs a person's yes and go on later (status
   * `waiting`). Elsewhere (a subagent, countd ask) such a call is refused: nothing could wait.
   */
  canWait?: boolean;
  /** Goes on where a message stopped for an approval, with the person's answer; `message` is then unused. */
  resume?: { from: SuspendedMessage; decision: ApprovalDecision };
}

type EndStatus = "ok" | "limit" | "cancelled" | "error" | "budget" | "waiting";

/** One tool call the loop ran, in the order they ran. */
export interface ToolCallReport {
  name: string;
  arguments: unknown;
  isError: boolean;
  result: string;
}

/** How one message ended, returned by the loop to its caller; watchers get the same figures as `message.finished`. */
export interface MessageReport {
  status: EndStatus;
  iterations: number;
  toolCalls: number;
  usage: Usage;
  /** USD of the calls this loop made (not its subagents'); null when one of them has no price. */
  cost: number | null;
  durationMs: number;
  error?: string;
  /** The calls that ran (not those answered as not run at a limit or a cancel). */
  calls: ToolCallReport[];
  /** With typed output, the answer's value once valid against the schema. */
  output?: { value: unknown };
  /** Status `waiting`: where the message stopped, to go on once a person answered. */
  suspended?: SuspendedMessage;
}

export class AgentLoop {
  readonly events: EventBus;
  readonly maxIterations: number;
  readonly maxRetries: number;
  readonly retryDelayMs: number;
  readonly temperature: number;
  readonly maxTokens: number;
  readonly maxHistory: number;
  readonly model: string;
  private readonly locale: Locale;

  constructor(private readonly opts: AgentLoopOptions) {
    this.events = opts.events ?? new EventBus();
    this.model = opts.model;
    this.maxIterations = opts.maxIterations ?? 25;
    this.maxRetries = opts.maxRetries ?? 3;
    this.retryDelayMs = opts.retryDelayMs ?? 1000;
    this.temperature = opts.temperature ?? 0.7;
    this.maxTokens = opts.maxTokens ?? 4096;
    this.maxHistory = opts.maxHistory ?? 100;
    this.locale = opts.locale ?? "en";
  }

  /**
   * Handles one user message, yields answer text as it arrives and returns its report. Ends
   * normally on an answer, a limit (with the limit notice as the last chunk) or a cancel (nothing
   * more is yielded); throws the LLMError when the provider gives up.
   */
  async *processMessage(message: string, sessionId: string, options: ProcessOptions = {}): AsyncGenerator<string, MessageReport> {
    const { report, failure } = yield* this.converse(message, sessionId, options);
    if (report.status === "error") throw failure;
    return report;
  }

  /** Collects the whole answer: for the CLI, subagents and tests. */
  async processDirect(
    content: string,
    sessionId: string,
    options: ProcessOptions = {},
  ): Promise<{ answer: string; report: MessageReport }> {
    const { answer, report, failure } = await this.settle(content, sessionId, options);
    if (report.status === "error") throw failure;
    return { answer, report };
  }

  /**
   * Like processDirect, but a failure is reported, not thrown: the report of a run that failed
   * still counts its iterations, tool calls and usage (the runner records them).
   */
  async settle(
    content: string,
    sessionId: string,
    options: ProcessOptions = {},
  ): Promise<{ answer: string; report: MessageReport; failure?: unknown }> {
    const messages = this.converse(content, sessionId, options);
    let answer = "";
    for (let next = await messages.next(); ; next = await messages.next()) {
      if (next.done) return { answer, ...next.value };
      answer += next.value;
    }
  }

  /**
   * What this loop's first LLM call for `message` would send with no history: the messages its
   * context builder makes and the tools offered, each with its MCP server. Read-only: a preview
   * (countd rehearse) shows and sizes it without calling the model.
   */
  async offered(
    message: string,
    { channel, clock }: Pick<ProcessOptions, "channel" | "clock"> = {},
  ): Promise<{ messages: ChatMessage[]; definitions: ToolDefinition[]; tools: Array<{ name: string; server?: string }> }> {
    const { tools, contextBuilder } = this.opts;
    const messages = await contextBuilder.buildMessages([], message, {
      channel,
      ...(clock ? { now: clock.at, timezone: clock.timeZone } : {}),
    });
    const definitions = tools.getDefinitions();
    const offered = definitions.map(({ function: { name } }) => {
      const server = tools.forAgent(name)?.server;
      return server === undefined ? { name } : { name, server };
    });
    return { messages, definitions, tools: offered };
  }

  /** A new message's conversation: the session's history (summarised first when too long) and the message. */
  private async firstMessages(message: string, sessionId: string, options: ProcessOptions): Promise<ChatMessage[]> {
    const history = options.context ?? (await this.opts.sessions?.load(sessionId)) ?? [];
    return this.opts.contextBuilder.buildMessages(history, message, {
      media: options.media,
      channel: options.channel,
      ...(options.clock ? { now: options.clock.at, timezone: options.clock.timeZone } : {}),
    });
  }

  private toolDeps() {
    const { tools, workspace, toolHistory } = this.opts;
    return { tools, workspace, toolHistory, events: this.events, maxRetries: this.maxRetries, retryDelayMs: this.retryDelayMs };
  }

  /** The loop itself; a failure ends it with status `error` and the thrown value beside the report. */
  private async *converse(
    message: string,
    sessionId: string,
    options: ProcessOptions,
  ): AsyncGenerator<string, { report: MessageReport; failure?: unknown }> {
    const { provider, tools, contextBuilder, sessions } = this.opts;
    const cancel = options.cancelToken ?? new CancelToken();
    const started = performance.now();
    const from = options.resume?.from;
    const usage = emptyUsage();
    if (from) addUsage(usage, from.usage);
    let cost: number | null = from ? from.cost : 0;
    const transcript: ChatMessage[] = from ? structuredClone(from.transcript) : [];
    let iterations = from?.iterations ?? 0;
    let toolCalls = from?.toolCalls ?? 0;
    let status: EndStatus = "ok";
    let failure: unknown;
    const calls: ToolCallReport[] = from ? structuredClone(from.calls) : [];
    let suspended: SuspendedMessage | undefined;
    let said = "";
    /** The rule the call that stops the message matched. */
    let waitsOn = "";
    const breakerLimits = this.opts.breaker ?? DEFAULT_BREAKER;
    const breaker = breakerLimits ? new Breaker(breakerLimits) : undefined;
    let runaway: string | undefined;
    let figures: Omit<MessageReport, "calls">;
    const typed = options.output && new TypedAnswer(options.output, this.opts.structuredOutput === true);
    let output: { value: unknown } | undefined;
    const callOptions = {
      model: this.model,
      temperature: this.temperature,
      maxTokens: this.maxTokens,
      signal: cancel.signal,
      ...(typed?.format ? { answer: typed.format } : {}),
    };
    if (typed && !from) message = typed.message(message);
    if (from) message = from.message;

    try {
      if (sessions && this.opts.memory && !options.context && !from) {
        await this.opts.budget?.check();
        // A failed summary keeps the whole history (nothing is lost) and must not cost the run.
        await summarizeOverflow({
          store: sessions,
          sessionId,
          maxHistory: this.maxHistory,
          memory: this.opts.memory,
          summarize: llmSummarizer(journaledSummaries(provider, options.journal, this.opts.unpriced === true), callOptions, this.locale),
        }).catch((err: unknown) => this.events.emit("warning", { sessionId, message: `history not summarised: ${errorText(err)}` }));
      }
      const messages = from ? structuredClone(from.messages) : await this.firstMessages(message, sessionId, options);
      if (!from) {
        transcript.push(userRecord(message, options.media));
        journalPrompt(options.journal, messages, message);
      }
      // The session is appended to at the end: a new one's file is created meanwhile.
      sessions?.expect?.(sessionId);
      const definitions = tools.getDefinitions();

      /** Answers one call in the conversation; false when it waits for a person's yes instead. */
      const answer = async (call: ToolCall, decided?: ApprovalDecision): Promise<boolean> => {
        let outcome: ToolOutcome;
        const rule = decided || cancel.cancelled ? undefined : await this.opts.approvals?.needs(call);
        if (rule && options.canWait) {
          waitsOn = rule;
          return false;
        }
        if (cancel.cancelled) {
          status = "cancelled";
          outcome = notRun("Error: not run, the run was cancelled.");
        } else if (toolCalls >= this.maxIterations) {
          status = "limit";
          outcome = notRun(`Error: not run, the limit of ${this.maxIterations} tool calls was reached.`);
        } else if (runaway || (runaway = breaker?.call(call.name, call.arguments ?? call.rawArguments))) {
          outcome = notRun(`Error: not run, ${runaway}.`);
        } else if (decided && "reason" in decided) {
          outcome = notRun(`Error: not run, ${decided.reason}.`);
        } else {
          // A replay's recorded result is the world as it was: its call was answered then, and runs no more.
          const served = this.opts.recorded?.serve(call);
          if (rule && (!served || "refused" in served)) {
            outcome = notRun(`Error: not run, it needs a person's approval (${rule}), which only a job's run can wait for.`);
          } else {
            toolCalls++;
            outcome = await runToolCall(this.toolDeps(), call, {
              sessionId,
              userMessage: message,
              cancelToken: cancel,
              journal: options.journal,
              served,
            });
            calls.push({
              name: call.name,
              arguments: call.arguments ?? call.rawArguments,
              isError: outcome.isError,
              result: outcome.content,
            });
            runaway = breaker?.result(call.name, outcome.content, outcome.isError);
          }
        }
        journalTool(options.journal, call, outcome, tools.forAgent(call.name)?.server);
        contextBuilder.addToolResult(messages, call, outcome.content, outcome.isError);
        transcript.push(messages.at(-1)!);
        return true;
      };
      /** Answers an assistant message's calls in turn, until one waits: the message then stops there. */
      const answerAll = async (pending: ToolCall[], decided?: ApprovalDecision): Promise<void> => {
        for (const [index, call] of pending.entries()) {
          if (await answer(call, index === 0 ? decided : undefined)) continue;
          status = "waiting";
          const activeMs = (from?.activeMs ?? 0) + performance.now() - started;
          const copied = structuredClone({ messages, transcript, calls });
          suspended = {
            message,
            said,
            ...copied,
            pending: pending.slice(index),
            rule: waitsOn,
            iterations,
            toolCalls,
            usage: { ...usage },
            cost,
            activeMs,
          };
          return;
        }
      };

      if (from) {
        // The answer goes on from what the message said before it stopped.
        said = from.said;
        if (said) yield said;
        const { decision } = options.resume!;
        if ("fail" in decision) {
          // The calls still get their answers, so the session stays well formed.
          for (const call of from.pending) await answer(call, { approved: false, reason: decision.fail });
          throw new Error(decision.fail);
        }
        await answerAll(from.pending, decision);
        if (status === "ok") runaway ??= breaker?.iteration();
        if (runaway) throw new RunawayRun(runaway);
        if (status === "ok" && toolCalls >= this.maxIterations) status = "limit";
      }

      while (status === "ok") {
        if (cancel.cancelled) {
          status = "cancelled";
          break;
        }
        if (iterations >= this.maxIterations) {
          status = "limit";
          break;
        }
        await this.opts.budget?.check({ messages, tools: definitions, model: this.model, maxTokens: this.maxTokens });
        iterations++;
        this.events.emit("iteration", { sessionId, iteration: iterations });

        const iteration = new Iteration(this.opts.unpriced === true);
        const asked = { ...callOptions, tools: definitions, messages: messages.length };
        const callStarted = performance.now();
        try {
          for await (const event of provider.chatStream(messages, definitions, callOptions)) {
            const text = iteration.accept(event);
            // A typed answer is shown once valid (below): an attempt that fails its schema is no answer.
            if (text === undefined || cancel.cancelled || typed) continue;
            this.events.emit("answer.chunk", { sessionId, text });
            said += text;
            yield text;
          }
        } catch (err) {
          // A cancel that aborted the request mid-stream ends the iteration quietly; the check below stops the run.
          if (!cancel.cancelled) {
            iteration.fail(err);
            throw err;
          }
        } finally {
          addUsage(usage, iteration.usage);
          cost = addCost(cost, iteration.cost);
          const called = iteration.report(sessionId, this.model, performance.now() - callStarted, cancel.cancelled);
          this.events.emit("llm.finished", called);
          journalCall(options.journal, asked, iteration, called);
        }
        if (cancel.cancelled) {
          status = "cancelled";
          break;
        }

        contextBuilder.addAssistantMessage(messages, iteration.text || null, iteration.calls, iteration.reasoning);
        transcript.push(messages.at(-1)!);
        if (iteration.calls.length === 0) {
          if (!typed) break;
          const verdict = typed.check(iteration.text);
          if (verdict.ok) {
            output = { value: verdict.value };
            const shown = JSON.stringify(verdict.value, null, 2);
            this.events.emit("answer.chunk", { sessionId, text: shown });
            yield shown;
            break;
          }
          // The conversation goes on: the model sees its answer and what is wrong with it.
          const repair = typed.repair(verdict.errors);
          if ("failure" in repair) throw repair.failure;
          messages.push({ role: "user", content: repair.request });
          transcript.push(messages.at(-1)!);
          options.journal?.write({ kind: "repair", errors: verdict.errors });
          continue;
        }

        await answerAll(iteration.calls);
        if (status !== "ok") break;
        runaway ??= breaker?.iteration();
        // Every call was answered above, so the session stays well formed for the next run.
        if (runaway) throw new RunawayRun(runaway);
        if (toolCalls >= this.maxIterations) status = "limit";
      }

      if (status === "limit") {
        const notice = limitNotice(this.locale, this.maxIterations);
        transcript.push({ role: "assistant", content: notice });
        options.journal?.write({ kind: "note", text: notice });
        this.events.emit("answer.chunk", { sessionId, text: notice });
        yield `\n\n${notice}`;
      }
    } catch (err) {
      status = err instanceof BudgetExceeded ? "budget" : "error";
      failure = err;
    } finally {
      // Also when the caller stops reading early: what was said is kept and watchers hear the end.
      // Both are written once per message, side by side, not once per call. A waiting message
      // keeps its turn in its suspension: the session gets it whole once it ends.
      const ended = (status as EndStatus) !== "waiting";
      await Promise.all([
        transcript.length > 0 && ended ? sessions?.append(sessionId, transcript, options.runId) : sessions?.dismiss?.(sessionId),
        options.journal ? undefined : this.opts.toolHistory?.flush(sessionId),
      ]);
      figures = {
        status,
        iterations,
        toolCalls,
        usage,
        cost,
        durationMs: performance.now() - started,
        ...(failure !== undefined ? { error: errorText(failure) } : {}),
      };
      this.events.emit("message.finished", { sessionId, ...figures });
    }
    const report: MessageReport = { ...figures, calls, ...(output ? { output } : {}), ...(suspended ? { suspended } : {}) };
    return status === "error" ? { report, failure } : { report };
  }
}

function notRun(content: string): ToolOutcome {
  return { content, isError: true, attempts: 0, durationMs: 0 };
}

/** Images are not copied into the session file: the path is kept, the bytes stay on disk. */
function userRecord(message: string, media: string[] | undefined): ChatMessage {
  if (!media || media.length === 0) return { role: "user", content: message };
  return { role: "user", content: `${message}\n\n[attached images: ${media.join(", ")}]` };
}
