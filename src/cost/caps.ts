/*
 * The caps a budget sets, apart from the spending they are checked against (budget.ts), so that
 * the configuration and job schemas can name them without importing the stores.
 */

/** A job's caps (job file `budget:`, or the heartbeat's): USD and tokens, per run and per day. */
export interface BudgetCaps {
  perRun?: number;
  perDay?: number;
  tokensPerRun?: number;
  tokensPerDay?: number;
}

/** countd.yaml's `budget:`: the caps of all runs together, and the time zone whose day every daily cap counts. */
export interface DaemonBudget {
  perDay?: number;
  tokensPerDay?: number;
  timezone: string;
}

/** A job file's or countd.yaml's `budget:` as written, into BudgetCaps. */
export const budgetCaps = (c: { per_run?: number; per_day?: number; tokens_per_run?: number; tokens_per_day?: number }): BudgetCaps => ({
  ...(c.per_run !== undefined ? { perRun: c.per_run } : {}),
  ...(c.per_day !== undefined ? { perDay: c.per_day } : {}),
  ...(c.tokens_per_run !== undefined ? { tokensPerRun: c.tokens_per_run } : {}),
  ...(c.tokens_per_day !== undefined ? { tokensPerDay: c.tokens_per_day } : {}),
});
