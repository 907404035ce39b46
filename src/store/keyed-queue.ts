/** Runs tasks for one key one after another; a failed task does not block the next. */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).catch(() => undefined).then(task);
    this.tails.set(key, result);
    const forget = () => {
      if (this.tails.get(key) === result) this.tails.delete(key);
    };
    result.then(forget, forget);
    return result;
  }

  /** Resolves once every task queued so far, and any queued while waiting, has settled. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.allSettled([...this.tails.values()]);
  }
}
