/** A cancel token backed by an AbortSignal, so one cancel also aborts the in-flight LLM request. */
export class CancelToken {
  private readonly controller = new AbortController();

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get cancelled(): boolean {
    return this.controller.signal.aborted;
  }

  cancel(reason = "cancelled"): void {
    if (!this.cancelled) this.controller.abort(new Error(reason));
  }

  /** Cancels this token when `signal` aborts (a run timeout, a daemon shutdown). */
  static from(signal: AbortSignal): CancelToken {
    const token = new CancelToken();
    if (signal.aborted) token.cancel();
    else signal.addEventListener("abort", () => token.cancel(), { once: true });
    return token;
  }
}
