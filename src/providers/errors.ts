/**
 * The typed error every provider throws, whatever SDK sits underneath. The retry layer decides
 * from `kind` alone, so each provider maps its SDK's failures here and nowhere else.
 */
export type LLMErrorKind =
  | "rate_limit" // 429
  | "overloaded" // 529
  | "server" // 5xx
  | "connection" // refused, reset, timed out before a response
  | "stream" // the response started, then broke: error event, dropped connection, malformed chunk
  | "client" // 4xx other than 429: retrying would fail the same way
  | "cancelled";

const RETRYABLE: ReadonlySet<LLMErrorKind> = new Set(["rate_limit", "overloaded", "server", "connection", "stream"]);

export class LLMError extends Error {
  override readonly name = "LLMError";
  readonly kind: LLMErrorKind;
  readonly status: number | undefined;
  /** Server-requested wait before the next attempt, from `retry-after-ms` or `retry-after`. */
  readonly retryAfterMs: number | undefined;
  /** Requests made before giving up; set by the retry layer. */
  attempts = 1;

  constructor(kind: LLMErrorKind, message: string, opts: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.kind = kind;
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.kind);
  }
}

export function kindForStatus(status: number): LLMErrorKind {
  if (status === 429) return "rate_limit";
  if (status === 529) return "overloaded";
  if (status >= 500) return "server";
  return "client";
}

type HeaderBag = Headers | Record<string, string | string[] | undefined> | undefined | null;

function header(headers: HeaderBag, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

/** `retry-after-ms` (milliseconds) wins over `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(headers: HeaderBag, now = Date.now()): number | undefined {
  const ms = Number.parseFloat(header(headers, "retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = header(headers, "retry-after");
  if (raw === undefined) return undefined;
  const seconds = Number.parseFloat(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export function httpError(status: number, message: string, headers: HeaderBag, cause?: unknown): LLMError {
  return new LLMError(kindForStatus(status), `HTTP ${status}: ${message}`, {
    status,
    retryAfterMs: retryAfterMs(headers),
    cause,
  });
}
