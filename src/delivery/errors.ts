/**
 * The one error both senders throw. The outbox decides from these fields alone whether to retry,
 * when, and whether to stop sending to a target; `reason` is what `countd outbox` shows, so it
 * never holds a secret (webhook secret, credential headers, the secret parts of a webhook URL).
 */
export class DeliveryError extends Error {
  override readonly name = "DeliveryError";
  /** Retrying would fail the same way: mark the delivery dead now. */
  readonly permanent: boolean;
  /** HTTP status of the answer, when there was one. */
  readonly status: number | undefined;
  /** SMTP reply code, when the mail server answered. */
  readonly responseCode: number | undefined;
  /** The receiver asked for this wait (Retry-After on 429 or 503). */
  readonly retryAfterMs: number | undefined;
  /** The endpoint is gone for good (HTTP 410): stop sending anything to this target. */
  readonly disableTarget: boolean;

  constructor(
    reason: string,
    opts: { permanent: boolean; status?: number; responseCode?: number; retryAfterMs?: number; disableTarget?: boolean; cause?: unknown },
  ) {
    super(reason, { cause: opts.cause });
    this.permanent = opts.permanent;
    this.status = opts.status;
    this.responseCode = opts.responseCode;
    this.retryAfterMs = opts.retryAfterMs;
    this.disableTarget = opts.disableTarget ?? false;
  }

  get reason(): string {
    return this.message;
  }
}
