import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { lexer, type Token, type Tokens } from "marked";
import { heartbeatPrompt } from "../agent/heartbeat-prompt.js";
import { errorText } from "../text.js";
import { localClock } from "../time.js";
import { LONGEST_TIMER_MS } from "../timers.js";
import type { PersonaConfig } from "../agent/personalities.js";
import type { CountdEvents, EventBus, HeartbeatSkip } from "../events.js";
import type { HeartbeatConfig } from "../config/schema.js";
import { silentLogger, type Logger } from "../log.js";
import type { MemoryStore } from "../memory/store.js";
import type { HeartbeatState, StateStore } from "../store/state.js";
import { heartbeatRespondTool, HEARTBEAT_RESPOND, type HeartbeatResponse } from "../tools/heartbeat.js";
import type { Tool } from "../tools/types.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** A message identical to one delivered this recently is not sent again. */
const DEDUPE_WINDOW_MS = DAY;
/** Delivered check-ins older than this are dropped from the state: neither the cap nor the dedupe looks that far back. */
const DELIVERED_KEPT_MS = 2 * DAY;
/** Memory entries shown to the heartbeat agent. */
const MEMORY_ENTRIES = 5;

export type HeartbeatDecision = { run: true } | { run: false; skip: HeartbeatSkip; reason: string };

export type HeartbeatOutcome = { ran: false; reason: string } | { ran: true; delivered: boolean; reason?: string; message?: string };

export const hhmm = (minutes: number): string =>
  `${String(Math.floor(minutes / 60)).padStart(2, "0")}:${String(minutes % 60).padStart(2, "0")}`;

/** End is exclusive; start after end wraps past midnight; start equal to end means all day. */
export function insideActiveHours(minutes: number, { start, end }: { start: number; end: number }): boolean {
  if (start === end) return true;
  return start < end ? minutes >= start && minutes < end : minutes >= start || minutes < end;
}

const COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const CHECKBOX = /^\[([ xX])\](?:\s|$)/;

/**
 * Whether HEARTBEAT.md asks for anything, read with marked's lexer: an unchecked task with text
 * (`- [ ] call the bank`, also with `*`, `+` or `1.`) or any other text asks; headings, thematic
 * breaks (`---`), HTML comments (`<!-- … -->`, also across lines), checked tasks (`- [x] …`) and
 * empty list items or checkboxes do not. So a file of headings, comments and ticked boxes lets
 * the heartbeat sleep.
 */
export function checklistIsActionable(checklist: string | undefined): boolean {
  if (checklist === undefined) return false;
  if (lastRead?.checklist !== checklist) lastRead = { checklist, actionable: lexer(checklist).some(asks) };
  return lastRead.actionable;
}

/** The last answer: nextCheckIn asks about one checklist for a week of ticks, and lexing it each time took seconds. */
let lastRead: { checklist: string; actionable: boolean } | undefined;

function asks(token: Token): boolean {
  switch (token.type) {
    case "space":
    case "heading":
    case "hr":
    case "checkbox":
      return false;
    case "list":
      return (token as Tokens.List).items.some(asks);
    case "list_item": {
      const item = token as Tokens.ListItem;
      // A ticked task's own text is done; a list nested under it may still hold open items.
      return item.tokens.some((child) => (child.type === "list" || !item.task || !item.checked ? asks(child) : false));
    }
    case "blockquote":
      return (token as Tokens.Blockquote).tokens.some(asks);
    case "paragraph":
    case "text":
    case "html":
      return (token as Tokens.Text).text.replace(COMMENT, "").split("\n").some(lineAsks);
    default:
      return token.raw.trim() !== "";
  }
}

/** A line of text. A checkbox outside a list (`[x] paid`), which Markdown makes no task, still counts as one. */
function lineAsks(raw: string): boolean {
  const line = raw.trim();
  const box = CHECKBOX.exec(line);
  if (!box) return line !== "";
  return box[1] === " " && line.slice(box[0].length).trim() !== "";
}

/** Check-ins delivered on `now`'s calendar day in the time zone. */
export function deliveredToday(state: HeartbeatState, now: Date, timezone: string): number {
  const today = localClock(now, timezone).date;
  return state.delivered.filter((d) => {
    const at = new Date(d.at);
    return !Number.isNaN(at.getTime()) && localClock(at, timezone).date === today;
  }).length;
}

/** Milliseconds since the last contact; undefined when there has been none. Never negative, so a clock step back does not read as "just talked". */
function idleMs(state: HeartbeatState, now: Date): number | undefined {
  const last = state.lastContactAt === undefined ? Number.NaN : Date.parse(state.lastContactAt);
  return Number.isNaN(last) ? undefined : Math.max(0, now.getTime() - last);
}

function duration(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  const [h, m] = [Math.floor(minutes / 60), minutes % 60];
  return h === 0 ? `${m}m` : m === 0 ? `${h}h` : `${h}h ${m}m`;
}

/**
 * Whether a heartbeat tick may spend an LLM call. The rules, in this order (the first that
 * applies gives the reason):
 * 1. outside `activeHours` in `config.timezone` → skip;
 * 2. check-ins delivered on today's date in `config.timezone` ≥ `maxPerDay` → skip;
 * 3. less than `idleThresholdMs` since `lastContactAt` → skip (no contact yet counts as idle);
 * 4. the checklist is actionable (see checklistIsActionable) → run;
 *    else a greeting is due — no check-in delivered today AND idle for at least the threshold
 *    (rule 3 already holds here) — → run; else skip.
 */
export function decideHeartbeat(input: {
  now: Date;
  config: HeartbeatConfig;
  state: HeartbeatState;
  checklist: string | undefined;
}): HeartbeatDecision {
  const { now, config, state, checklist } = input;
  const clock = localClock(now, config.timezone);
  const { start, end } = config.activeHours;
  if (!insideActiveHours(clock.minutes, config.activeHours)) {
    return {
      run: false,
      skip: "outside_active_hours",
      reason: `outside active hours ${hhmm(start)}-${hhmm(end)} (now ${clock.time} ${config.timezone})`,
    };
  }
  const today = deliveredToday(state, now, config.timezone);
  if (today >= config.maxPerDay) {
    return {
      run: false,
      skip: "daily_cap",
      reason: `daily cap reached: ${today} of ${config.maxPerDay} check-ins delivered today (${clock.date} ${config.timezone})`,
    };
  }
  const idle = idleMs(state, now);
  if (idle !== undefined && idle < config.idleThresholdMs) {
    return {
      run: false,
      skip: "recent_contact",
      reason: `user in contact recently: last contact ${duration(idle)} ago, idle threshold ${duration(config.idleThresholdMs)}`,
    };
  }
  if (checklistIsActionable(checklist)) return { run: true };
  if (today === 0) return { run: true };
  const why = checklist === undefined ? "no checklist file" : "no open item in the checklist";
  return {
    run: false,
    skip: "nothing_to_do",
    reason: `nothing to do: ${why}, and a check-in was already delivered today (${clock.date} ${config.timezone})`,
  };
}

/** Whitespace differences do not make a different message. */
export function messageHash(message: string): string {
  return createHash("sha256").update(message.trim().replace(/\s+/g, " ")).digest("hex");
}

const isHeartbeatOk = (text: string): boolean => /^\s*heartbeat_ok\s*$/i.test(text);

/** Why the run stays silent; undefined when it produced a message to send. */
function silenceReason(response: HeartbeatResponse | undefined, answer: string): string | undefined {
  if (!response) {
    return isHeartbeatOk(answer)
      ? `the agent answered HEARTBEAT_OK without calling ${HEARTBEAT_RESPOND}`
      : `the agent did not call ${HEARTBEAT_RESPOND} (its answer text is never delivered)`;
  }
  if (!response.notify) return "the agent chose not to notify";
  if (response.message.trim() === "") return "notify was true but the message was empty";
  if (isHeartbeatOk(response.message)) return "the message was just HEARTBEAT_OK";
  return undefined;
}

async function readChecklist(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`heartbeat checklist ${path} cannot be read: ${(err as Error).message}`);
  }
}

/** Ticks looked at by nextCheckIn: a week of every-minute ticks, far more than any sleep between check-ins. */
const CHECK_IN_LOOKAHEAD_TICKS = 7 * 24 * 60;

/**
 * The first tick, of `firstTick` and those every `everyMs` after it, at which decideHeartbeat
 * would ask the agent, given the state as it is now (the checklist is read once); undefined when
 * none of the next CHECK_IN_LOOKAHEAD_TICKS would. The agent may still choose to stay silent.
 */
export async function nextCheckIn(input: {
  config: HeartbeatConfig;
  state: HeartbeatState;
  firstTick: Date;
  lastExchange?: Date;
}): Promise<Date | undefined> {
  const { config, firstTick } = input;
  const checklist = await readChecklist(config.checklist);
  const state = withExchange(input.state, input.lastExchange);
  for (let tick = 0; tick < CHECK_IN_LOOKAHEAD_TICKS; tick++) {
    const now = new Date(firstTick.getTime() + tick * config.everyMs);
    if (decideHeartbeat({ now, config, state, checklist }).run) return now;
  }
  return undefined;
}

/** The idle threshold counts from whichever came last: a delivered check-in or an exchange. */
function withExchange(state: HeartbeatState, exchange: Date | undefined): HeartbeatState {
  if (!exchange) return state;
  const contact = state.lastContactAt === undefined ? Number.NaN : Date.parse(state.lastContactAt);
  return Number.isNaN(contact) || exchange.getTime() > contact ? { ...state, lastContactAt: exchange.toISOString() } : state;
}

/** `Run`: what the runner says of one agent run, handed on from runAgent to deliver. */
export interface HeartbeatServiceOptions<Run> {
  config: HeartbeatConfig;
  state: StateStore;
  memory: MemoryStore;
  persona: PersonaConfig;
  /** Runs the agent on the prompt with exactly these tools; resolves to the final answer text and the run. */
  runAgent: (prompt: string, tools: Tool[]) => Promise<{ answer: string; run: Run }>;
  /** Sends the check-in `run` produced to the heartbeat's recipients; resolves once it was delivered. */
  deliver: (message: string, run: Run) => Promise<void>;
  /** The last exchange with the user outside the heartbeat (`countd ask`), if any. */
  lastExchange?: () => Promise<Date | undefined>;
  /** When the next tick was set for: the daemon publishes it for `countd jobs`. */
  onScheduled?: (at: Date) => void;
  /**
   * In a cluster: whether this daemon decides the tick at `slot`, a multiple of `everyMs` since
   * the epoch (every daemon ticks at the same slots, and one decides each). Unset, ticks are every
   * `everyMs` from the start and each is decided here.
   */
  claimTick?: (slot: Date) => Promise<boolean>;
  /** Told how each tick ended (the console's metrics count them). */
  events?: EventBus;
  now?: () => Date;
  log?: Logger;
}

/** Proactive check-ins: decides without the LLM, asks the agent only when it may speak, and remembers what it sent. */
export class HeartbeatService<Run> {
  private readonly now: () => Date;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | undefined;
  private active = false;
  private running = false;

  constructor(private readonly opts: HeartbeatServiceOptions<Run>) {
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "heartbeat" });
  }

  async tick(): Promise<HeartbeatOutcome> {
    const { config, state, memory, persona } = this.opts;
    const now = this.now();
    const checklist = await readChecklist(config.checklist);
    const decision = decideHeartbeat({
      now,
      config,
      state: withExchange(state.data.heartbeat, await this.opts.lastExchange?.()),
      checklist,
    });
    if (!decision.run) {
      this.decided({ outcome: "skipped", reason: decision.skip });
      this.log.info({ reason: decision.reason }, "heartbeat skipped");
      return { ran: false, reason: decision.reason };
    }

    const respond = heartbeatRespondTool();
    const idle = idleMs(state.data.heartbeat, now);
    const prompt = heartbeatPrompt({
      now,
      timezone: config.timezone,
      idleHours: idle === undefined ? undefined : idle / HOUR,
      persona,
      memories: await memory.lastEntries(MEMORY_ENTRIES),
      checklist,
    });
    let agent: { answer: string; run: Run };
    try {
      agent = await this.opts.runAgent(prompt, [respond.tool]);
    } catch (err) {
      const error = errorText(err);
      this.decided({ outcome: "failed" });
      this.log.error({ error }, "heartbeat agent run failed");
      return { ran: true, delivered: false, reason: `heartbeat agent run failed: ${error}` };
    }

    const response = respond.result();
    const silence = silenceReason(response, agent.answer);
    if (silence !== undefined) {
      this.decided({ outcome: "silent" });
      this.log.info({ reason: silence }, "heartbeat silent");
      return { ran: true, delivered: false, reason: silence };
    }
    const message = response!.message.trim();
    const hash = messageHash(message);
    const earlier = state.data.heartbeat.delivered.find((d) => d.hash === hash && now.getTime() - Date.parse(d.at) < DEDUPE_WINDOW_MS);
    if (earlier) {
      const reason = `heartbeat suppressed: the same message was delivered at ${earlier.at}`;
      this.decided({ outcome: "duplicate" });
      this.log.info({ deliveredAt: earlier.at }, "heartbeat suppressed: the same message was delivered before");
      return { ran: true, delivered: false, reason, message };
    }

    try {
      await this.opts.deliver(message, agent.run);
    } catch (err) {
      // Not recorded: an undelivered check-in must not use up the daily cap or block its retry by the dedupe.
      const error = errorText(err);
      this.decided({ outcome: "failed" });
      this.log.error({ error }, "heartbeat delivery failed");
      return { ran: true, delivered: false, reason: `heartbeat delivery failed: ${error}`, message };
    }
    const at = this.now();
    await state.update((data) => {
      const hb = data.heartbeat;
      hb.delivered = hb.delivered.filter((d) => at.getTime() - Date.parse(d.at) < DELIVERED_KEPT_MS);
      hb.delivered.push({ at: at.toISOString(), hash });
      // A delivered check-in is contact with the recipient: the idle threshold counts from it.
      hb.lastContactAt = at.toISOString();
    });
    this.decided({ outcome: "sent" });
    this.log.info({ characters: message.length }, "heartbeat delivered");
    return { ran: true, delivered: true, message };
  }

  private decided(decision: CountdEvents["heartbeat.decision"]): void {
    this.opts.events?.emit("heartbeat.decision", decision);
  }

  /**
   * Ticks every `everyMs`, measured from the start of the previous tick (in a cluster, at the
   * multiples of `everyMs`); a slow tick is never overlapped by the next.
   */
  start(): void {
    const { enabled, everyMs } = this.opts.config;
    if (!enabled) {
      this.log.info("heartbeat disabled (heartbeat.enabled is false)");
      return;
    }
    if (everyMs > LONGEST_TIMER_MS) {
      throw new Error(`heartbeat.every is ${everyMs} ms; the longest supported interval is ${LONGEST_TIMER_MS} ms (about 24.8 days)`);
    }
    if (this.active) return;
    this.active = true;
    // A tick still running from before a stop() schedules the next one when it ends.
    if (!this.running) this.schedule(this.delay(everyMs, Date.now()));
  }

  /** No further ticks start; a tick in progress finishes. */
  stop(): void {
    this.active = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Until the next tick, `wait` after the last one alone; in a cluster, the slot after `slot` (or after now). */
  private delay(wait: number, now: number, slot?: number): number {
    if (!this.opts.claimTick) return wait;
    const { everyMs } = this.opts.config;
    return Math.max(0, (slot ?? now - (now % everyMs)) + everyMs - now);
  }

  private schedule(delay: number): void {
    this.opts.onScheduled?.(new Date(Date.now() + delay));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const started = Date.now();
      const { everyMs } = this.opts.config;
      // The slot the timer was set for: it may fire late, or a little early by the wall clock.
      const slot = Math.round(started / everyMs) * everyMs;
      this.running = true;
      this.claimed(new Date(slot))
        .then((mine) => (mine ? this.tick() : undefined))
        .catch((err: unknown) => this.log.error({ error: errorText(err) }, "heartbeat tick failed"))
        .finally(() => {
          this.running = false;
          if (this.active) this.schedule(this.delay(Math.max(0, everyMs - (Date.now() - started)), Date.now(), slot));
        });
    }, delay);
  }

  /** Whether this daemon decides the tick: always alone; in a cluster, if it claimed the tick's slot. */
  private async claimed(slot: Date): Promise<boolean> {
    if (!this.opts.claimTick) return true;
    const mine = await this.opts.claimTick(slot);
    if (!mine) this.log.debug({ slot: slot.toISOString() }, "heartbeat tick decided by another daemon");
    return mine;
  }
}
