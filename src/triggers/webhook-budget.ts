/**
 * Bytes of webhook bodies held before their signature is checked, across all requests: a sender
 * without the secret may open many connections, and each may send up to the job's max_body.
 */
export const MAX_UNVERIFIED_BYTES = 16 * 1024 * 1024;

/** The bytes one request holds against the shared total. */
export interface BodyHold {
  /** Takes `n` more bytes; false when that would pass the total (nothing is taken then). */
  take(n: number): boolean;
  release(): void;
}

export class UnverifiedBytes {
  private heldBytes = 0;

  /**
   * A hold for one request. A request alone may pass the total up to its job's max_body (at most
   * 64 MB), or a job taking larger bodies could never be fired; beside others it may not.
   */
  hold(): BodyHold {
    let mine = 0;
    return {
      take: (n) => {
        const othersHold = this.heldBytes > mine;
        if (othersHold && this.heldBytes + n > MAX_UNVERIFIED_BYTES) return false;
        mine += n;
        this.heldBytes += n;
        return true;
      },
      release: () => {
        this.heldBytes -= mine;
        mine = 0;
      },
    };
  }
}
