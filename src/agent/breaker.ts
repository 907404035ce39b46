import { excerpt, plural } from "../text.js";
import { FinalToolError } from "../tools/types.js";
import { withoutBoundaries } from "../tools/untrusted.js";

/** When a run that repeats itself is ended: each count is where the breaker trips. */
export interface BreakerLimits {
  /** The same tool with the same arguments: this call is not run. */
  sameCall: number;
  /** Tool results in a row that were errors. */
  errorsInARow: number;
  /** LLM iterations in a row whose tool calls brought only results already seen in the run. */
  idleIterations: number;
}

/** false: the breaker is off. */
export type BreakerSettings = BreakerLimits | false;

export const DEFAULT_BREAKER: BreakerLimits = { sameCall: 3, errorsInARow: 5, idleIterations: 8 };

/** A job's own `breaker:` over countd.yaml's: false is off, a job's limits fill in over countd.yaml's (or the defaults, where countd.yaml turned it off). */
export function breakerFor(own: false | Partial<BreakerLimits> | undefined, base: BreakerSettings): BreakerSettings {
  if (own === undefined || own === false) return own ?? base;
  return { ...(base || DEFAULT_BREAKER), ...own };
}

/**
 * Ends the message with status `error`; its message is the reason, `runaway: …`. Final: a
 * subagent that ran away fails its parent's spawn call once, as the same task would run away again.
 */
export class RunawayRun extends FinalToolError {
  override readonly name: string = "RunawayRun";
}

/**
 * Watches one message's tool calls and results for a run that goes round in circles: a denied
 * command asked again and again, a file that is not there, a tool polled for news that never
 * comes. Each method returns the reason to stop, or nothing. One per message: a subagent's loop
 * has its own.
 */
export class Breaker {
  private readonly calls = new Map<string, number>();
  private readonly results = new Set<string>();
  private errors = 0;
  private idle = 0;
  private newResult = false;
  private last = "";

  constructor(private readonly limits: BreakerLimits) {}

  /** Before a call runs: a call made `sameCall` times already is not made again. */
  call(name: string, args: unknown): string | undefined {
    const key = `${name} ${canonical(args)}`;
    const seen = (this.calls.get(key) ?? 0) + 1;
    this.calls.set(key, seen);
    this.last = shown(key);
    if (seen >= this.limits.sameCall) return `runaway: ${this.last} called ${seen} times with the same arguments`;
    return undefined;
  }

  /** After a call ran. */
  result(name: string, content: string, isError: boolean): string | undefined {
    // Each frame has its own random boundary: without it, a file read twice is the same result.
    const key = `${name}\0${withoutBoundaries(content)}`;
    if (!this.results.has(key)) {
      this.results.add(key);
      this.newResult = true;
    }
    this.errors = isError ? this.errors + 1 : 0;
    if (this.errors >= this.limits.errorsInARow) return `runaway: ${plural(this.errors, "tool error")} in a row, the last of ${this.last}`;
    return undefined;
  }

  /** After an iteration's tool calls ran: an iteration that learnt nothing new counts toward the idle limit. */
  iteration(): string | undefined {
    this.idle = this.newResult ? 0 : this.idle + 1;
    this.newResult = false;
    if (this.idle >= this.limits.idleIterations) {
      return `runaway: ${plural(this.idle, "LLM iteration")} in a row brought no new tool result, the last calling ${this.last}`;
    }
    return undefined;
  }
}

/** JSON with sorted keys, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same arguments; unparsable arguments are their raw text. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** A reason goes into alerts and run records: long arguments are cut. */
function shown(key: string): string {
  return excerpt(key, 200);
}
