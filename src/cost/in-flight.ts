/*
 * LLM calls made and not yet settled, each holding its worst case against the caps so that runs
 * going at once cannot all pass a check on the same spent figure. Held in this process only: where
 * daemons share a backend, another node's calls in flight are not seen.
 */

/** One call's worst case: USD (null for an unpriced model) and tokens. */
export interface Hold {
  readonly job: string;
  readonly run: string;
  readonly cost: number | null;
  readonly tokens: number;
  /** Ends the hold once the call is settled (counted in the ledger) or not made; a second call does nothing. */
  release(): void;
}

/** What calls in flight may still cost: USD over the priced ones, tokens over all. */
export interface Reserved {
  cost: number;
  tokens: number;
}

export class InFlight {
  private readonly holds = new Set<Hold>();

  hold(call: { job: string; run: string; cost: number | null; tokens: number }): Hold {
    const holds = this.holds;
    const hold: Hold = { ...call, release: () => void holds.delete(hold) };
    holds.add(hold);
    return hold;
  }

  /** The holds of one run, of one job, or of all. */
  reserved(of: { run?: string; job?: string } = {}): Reserved {
    const sum = { cost: 0, tokens: 0 };
    for (const hold of this.holds) {
      if ((of.run !== undefined && hold.run !== of.run) || (of.job !== undefined && hold.job !== of.job)) continue;
      sum.cost += hold.cost ?? 0;
      sum.tokens += hold.tokens;
    }
    return sum;
  }
}
