interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: one commit (a synced write) at a time, and every change asked for while one runs
 * goes to disk with the next, so a burst of changes shares one sync rather than taking one each.
 * The owner of the data hands `commit`, which writes everything changed since the last commit.
 */
export class GroupCommit {
  private waiters: Waiter[] = [];
  /** The commit loop while it runs. */
  private running: Promise<void> | undefined;

  constructor(private readonly commit: () => Promise<void>) {}

  /** Resolves once a commit that started after this call succeeded; rejects with its error if it failed. */
  request(): Promise<void> {
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    // Started on the next microtask, so that changes made in the same turn share the first commit.
    this.running ??= Promise.resolve().then(() => this.run());
    return done;
  }

  /** Resolves once no commit runs: every one asked for so far is done. */
  async idle(): Promise<void> {
    await this.running;
  }

  private async run(): Promise<void> {
    while (this.waiters.length > 0) {
      const waiters = this.waiters;
      this.waiters = [];
      try {
        await this.commit();
        for (const waiter of waiters) waiter.resolve();
      } catch (err) {
        for (const waiter of waiters) waiter.reject(err);
      }
    }
    this.running = undefined;
  }
}
