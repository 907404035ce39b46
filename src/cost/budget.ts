import { addCost, addUsage, emptyUsage, type Usage } from "../providers/types.js";
import { tokensOf, type SpendBook } from "../store/spend-ledger.js";
import type { BudgetCaps, DaemonBudget } from "./caps.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { usd } from "../text.js";

/** A cap was reached: the run ends with status `budget`; the message names the cap and the amounts. */
export class BudgetExceeded extends Error {
  override readonly name = "BudgetExceeded";
}

/** What the agent loop asks before each LLM call. */
export interface BudgetCheck {
  /** Rejects with BudgetExceeded when a cap is reached: the call must not be made. */
  check(): Promise<void>;
}

const amount = (value: number, unit: "usd" | "tokens") => (unit === "usd" ? usd(value) : `${value} tokens`);

/** Throws when `spent` is at or past `cap`; an unknown amount (an unpriced run's cost) reaches no cap. */
function enforce(name: string, cap: number | undefined, spent: number | null, unit: "usd" | "tokens", saying: (spent: string) => string): void {
  if (cap === undefined || spent === null || spent < cap) return;
  throw new BudgetExceeded(`${name} of ${amount(cap, unit)} is spent: ${saying(amount(spent, unit))}`);
}

/**
 * One run's spending: every LLM call made for it (its subagents' and its history summary's too)
 * adds here and to the ledger, and each call is first checked against the run's, the job's and
 * countd's caps. A cap is reached when what was spent is at or past it: a call's price is known
 * only once it is made, so the call that crosses a cap is the last one. An unpriced model's calls
 * count toward the token caps alone; the run's cost is then null (not known), never 0.
 */
export class RunSpend implements BudgetCheck {
  readonly usage: Usage = emptyUsage();
  cost: number | null = 0;
  /** The model of the run's last call. */
  model: string | undefined;

  constructor(
    private readonly opts: {
      job: string;
      runId: string;
      caps: BudgetCaps;
      daemon: DaemonBudget;
      /** Absent for a call outside any job (`countd ask`): no daily cap applies. */
      ledger?: SpendBook;
      now?: () => Date;
    },
  ) {}

  async check(): Promise<void> {
    const { caps, daemon, ledger, job } = this.opts;
    const tokens = tokensOf(this.usage);
    const whose = job === HEARTBEAT_JOB ? "the heartbeat's" : "the job's";
    enforce(`${whose} per-run budget`, caps.perRun, this.cost, "usd", (spent) => `this run has cost ${spent}`);
    enforce(`${whose} per-run budget`, caps.tokensPerRun, tokens, "tokens", (spent) => `this run has used ${spent}`);
    if (!ledger) return;
    const on = (spent: { date: string }) => `on ${spent.date} (${daemon.timezone})`;
    if (caps.perDay !== undefined || caps.tokensPerDay !== undefined) {
      const spent = await ledger.today(daemon.timezone, job);
      enforce(`${whose} daily budget`, caps.perDay, spent.cost, "usd", (amount) => `its runs have cost ${amount} ${on(spent)}`);
      enforce(`${whose} daily budget`, caps.tokensPerDay, spent.tokens, "tokens", (amount) => `its runs have used ${amount} ${on(spent)}`);
    }
    if (daemon.perDay !== undefined || daemon.tokensPerDay !== undefined) {
      const spent = await ledger.today(daemon.timezone);
      enforce("countd's daily budget (budget.per_day)", daemon.perDay, spent.cost, "usd", (amount) => `all runs have cost ${amount} ${on(spent)}`);
      enforce("countd's daily budget (budget.tokens_per_day)", daemon.tokensPerDay, spent.tokens, "tokens", (amount) => `all runs have used ${amount} ${on(spent)}`);
    }
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
    return new RunSpend({ job: job.name, runId, caps: job.budget ?? {}, daemon: daemon(), ledger, ...(now ? { now } : {}) });
  }
}
