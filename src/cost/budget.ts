import { addCost, addUsage, emptyUsage, type ChatMessage, type ToolDefinition, type Usage } from "../providers/types.js";
import { tokensOf, type SpendBook } from "../store/spend-ledger.js";
import type { BudgetCaps, DaemonBudget } from "./caps.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { usd } from "../text.js";
import { estimatedUsage, requestTokens } from "./estimate.js";
import { InFlight, type Hold } from "./in-flight.js";

/** A cap was reached: the run ends with status `budget`; the message names the cap and the amounts. */
export class BudgetExceeded extends Error {
  override readonly name = "BudgetExceeded";
}

/** The call the loop is about to make: what its worst case is worked out from. */
export interface CallRequest {
  messages: ChatMessage[];
  tools: ToolDefinition[];
  model: string;
  maxTokens: number;
}

/** What the agent loop asks before each LLM call. */
export interface BudgetCheck {
  /**
   * Rejects with BudgetExceeded when a cap is reached: the call must not be made. Given the call,
   * it holds the call's worst case against the caps until the metered provider settles it.
   */
  check(call?: CallRequest): Promise<void>;
}

/** USD for a call's usage to a model, null when it has no price (cost/metered.ts makes it from the Pricer). */
export type PriceOf = (model: string, usage: Usage) => number | null;

const amount = (value: number, unit: "usd" | "tokens") => (unit === "usd" ? usd(value) : `${value} tokens`);

/**
 * Throws when what was spent and what calls in flight hold reach `cap`; an unknown amount (an
 * unpriced run's cost) reaches no cap. `~` marks a spent figure that holds estimated tokens.
 */
function enforce(
  name: string,
  cap: number | undefined,
  spent: number | null,
  held: number,
  unit: "usd" | "tokens",
  saying: (spent: string) => string,
  estimated = false,
): void {
  if (cap === undefined || spent === null || spent + held < cap) return;
  const figure = `${estimated ? "~" : ""}${amount(spent, unit)}`;
  if (held === 0) throw new BudgetExceeded(`${name} of ${amount(cap, unit)} is spent: ${saying(figure)}`);
  throw new BudgetExceeded(
    `${name} of ${amount(cap, unit)} is spent or reserved: ${saying(figure)}, and calls in flight may cost up to ${amount(held, unit)}`,
  );
}

/**
 * One run's spending: every LLM call made for it (its subagents' and its history summary's too)
 * adds here and to the ledger, and each call is first checked against the run's, the job's and
 * countd's caps. A cap is reached when what was spent, plus the worst case of the calls still in
 * flight (in this process: every run's), is at or past it. The call being checked may cross a cap
 * and is then the last one, so a cap is passed by at most one call's cost, however many runs go
 * at once. An unpriced model's calls count toward the token caps alone; the run's cost is then
 * null (not known), never 0.
 */
export class RunSpend {
  readonly usage: Usage = emptyUsage();
  cost: number | null = 0;
  /** The model of the run's last call. */
  model: string | undefined;
  /** Holds the loop took with its checks, until the metered provider starts the call they are for. */
  private readonly checked = new Map<ChatMessage[], Hold>();
  private readonly inFlight: InFlight;

  constructor(
    private readonly opts: {
      job: string;
      runId: string;
      caps: BudgetCaps;
      daemon: DaemonBudget;
      /** Absent for a call outside any job (`countd ask`): no daily cap applies. */
      ledger?: SpendBook;
      /** Every run's calls in flight in this process; the run's own when not given. */
      inFlight?: InFlight;
      now?: () => Date;
    },
  ) {
    this.inFlight = opts.inFlight ?? new InFlight();
  }

  /** The run's model has no price: what it spends is not known, from its start. */
  markUnpriced(): void {
    this.cost = null;
  }

  /** The loop's check, pricing each call's worst case as the run's provider does. */
  checker(price: PriceOf): BudgetCheck {
    return { check: (call) => this.check(price, call) };
  }

  private async check(price: PriceOf, call?: CallRequest): Promise<void> {
    const { caps, daemon, ledger, job, runId } = this.opts;
    const dailyJob = caps.perDay !== undefined || caps.tokensPerDay !== undefined;
    const dailyAll = daemon.perDay !== undefined || daemon.tokensPerDay !== undefined;
    const [jobToday, allToday] = await Promise.all([
      ledger && dailyJob ? ledger.today(daemon.timezone, job) : undefined,
      ledger && dailyAll ? ledger.today(daemon.timezone) : undefined,
    ]);
    // From here on nothing awaits: the holds read are those of this moment, and this call's hold
    // is taken before any other check can read them.
    const whose = job === HEARTBEAT_JOB ? "the heartbeat's" : "the job's";
    const estimated = (this.usage.estimatedTokens ?? 0) > 0;
    const run = this.inFlight.reserved({ run: runId });
    enforce(`${whose} per-run budget`, caps.perRun, this.cost, run.cost, "usd", (spent) => `this run has cost ${spent}`, estimated);
    enforce(
      `${whose} per-run budget`,
      caps.tokensPerRun,
      tokensOf(this.usage),
      run.tokens,
      "tokens",
      (spent) => `this run has used ${spent}`,
      estimated,
    );
    const on = (spent: { date: string }) => `on ${spent.date} (${daemon.timezone})`;
    if (jobToday) {
      const held = this.inFlight.reserved({ job });
      enforce(
        `${whose} daily budget`,
        caps.perDay,
        jobToday.cost,
        held.cost,
        "usd",
        (amount) => `its runs have cost ${amount} ${on(jobToday)}`,
      );
      enforce(
        `${whose} daily budget`,
        caps.tokensPerDay,
        jobToday.tokens,
        held.tokens,
        "tokens",
        (amount) => `its runs have used ${amount} ${on(jobToday)}`,
      );
    }
    if (allToday) {
      const held = this.inFlight.reserved();
      enforce(
        "countd's daily budget (budget.per_day)",
        daemon.perDay,
        allToday.cost,
        held.cost,
        "usd",
        (amount) => `all runs have cost ${amount} ${on(allToday)}`,
      );
      enforce(
        "countd's daily budget (budget.tokens_per_day)",
        daemon.tokensPerDay,
        allToday.tokens,
        held.tokens,
        "tokens",
        (amount) => `all runs have used ${amount} ${on(allToday)}`,
      );
    }
    if (call) {
      this.checked.get(call.messages)?.release();
      this.checked.set(call.messages, this.hold(price, call));
    }
  }

  /**
   * The hold of a call the metered provider is starting: the one its loop's check took for these
   * messages, or (a history summary, checked before its messages existed) a new one.
   */
  claim(price: PriceOf, call: CallRequest): Hold {
    const checked = this.checked.get(call.messages);
    this.checked.delete(call.messages);
    return checked ?? this.hold(price, call);
  }

  /**
   * A call's worst case: its request as estimated, and max_tokens of output. Input is estimated,
   * not bounded: a request that tokenizes denser than 4 bytes a token holds less than it costs.
   */
  private hold(price: PriceOf, call: CallRequest): Hold {
    const usage = estimatedUsage(requestTokens(call.messages, call.tools), call.maxTokens);
    return this.inFlight.hold({ job: this.opts.job, run: this.opts.runId, cost: price(call.model, usage), tokens: tokensOf(usage) });
  }

  /** Adds one finished call. */
  add(model: string, usage: Usage, cost: number | null): void {
    addUsage(this.usage, usage);
    this.cost = addCost(this.cost, cost);
    this.model = model;
    const at = (this.opts.now ?? (() => new Date()))().toISOString();
    this.opts.ledger?.record({ at, job: this.opts.job, run: this.opts.runId, model, usage: { ...usage }, cost });
  }
}

/** Makes each run's RunSpend from its job's caps and countd's, counting into one ledger. */
export class Budgets {
  private readonly inFlight = new InFlight();

  constructor(
    private readonly opts: {
      ledger: SpendBook;
      /** Read at each run, so a reloaded countd.yaml applies from the next run. */
      daemon: () => DaemonBudget;
      now?: () => Date;
    },
  ) {}

  forRun(job: { name: string; budget?: BudgetCaps }, runId: string): RunSpend {
    const { ledger, daemon, now } = this.opts;
    return new RunSpend({
      job: job.name,
      runId,
      caps: job.budget ?? {},
      daemon: daemon(),
      ledger,
      inFlight: this.inFlight,
      ...(now ? { now } : {}),
    });
  }
}
