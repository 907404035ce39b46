import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { lexer, type Token, type Tokens } from "marked";
import { hhmm, localClock } from "../time.js";
import type { HeartbeatSkip } from "../events.js";
import type { HeartbeatConfig } from "../config/schema.js";
import type { CheckInState } from "../store/state.js";
import { HEARTBEAT_RESPOND, type HeartbeatResponse } from "../tools/heartbeat.js";

export const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** A message identical to one delivered this recently is not sent again. */
export const DEDUPE_WINDOW_MS = DAY;
/** Delivered check-ins older than this are dropped from the state: neither the cap nor the dedupe looks that far back. */
export const DELIVERED_KEPT_MS = 2 * DAY;

export type HeartbeatDecision = { run: true } | { run: false; skip: HeartbeatSkip; reason: string };

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
export function deliveredToday(state: CheckInState, now: Date, timezone: string): number {
  const today = localClock(now, timezone).date;
  return state.delivered.filter((d) => {
    const at = new Date(d.at);
    return !Number.isNaN(at.getTime()) && localClock(at, timezone).date === today;
  }).length;
}

/** Milliseconds since the last contact; undefined when there has been none. Never negative, so a clock step back does not read as "just talked". */
export function idleMs(state: CheckInState, now: Date): number | undefined {
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
  state: CheckInState;
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
export function silenceReason(response: HeartbeatResponse | undefined, answer: string): string | undefined {
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

export async function readChecklist(path: string): Promise<string | undefined> {
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
  state: CheckInState;
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
export function withExchange(state: CheckInState, exchange: Date | undefined): CheckInState {
  if (!exchange) return state;
  const contact = state.lastContactAt === undefined ? Number.NaN : Date.parse(state.lastContactAt);
  return Number.isNaN(contact) || exchange.getTime() > contact ? { ...state, lastContactAt: exchange.toISOString() } : state;
}
