export const REDACTED = "[REDACTED]";

/** Shorter values would blank out ordinary words and numbers all over the log. */
const MIN_SECRET_LENGTH = 4;

/**
 * Keys whose values are secret whatever they hold: api_key, X-Api-Key, password, client_secret,
 * access_token, Authorization… Matched on the key lower-cased without "-" and "_", by ending,
 * so counters such as maxTokens or input_tokens stay visible.
 */
const SECRET_KEY = /(apikey|password|passwd|token|authorization)$|secret/;

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key.toLowerCase().replace(/[-_]/g, ""));
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Removes known secret values (from the environment and config) from anything about to be written. */
export class Redactor {
  private readonly pattern: RegExp | undefined;

  constructor(secrets: string[]) {
    const forms = new Set<string>();
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      forms.add(secret);
      // Inside serialised JSON a value with quotes, backslashes or control characters appears escaped.
      forms.add(JSON.stringify(secret).slice(1, -1));
    }
    // Longest first, so a secret that contains another is replaced whole.
    const alternatives = [...forms].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.pattern = alternatives.length > 0 ? new RegExp(alternatives.join("|"), "g") : undefined;
  }

  redact(text: string): string {
    return this.pattern ? text.replace(this.pattern, REDACTED) : text;
  }

  /** A copy with secret values replaced in every string, and every value under a secret-named key hidden. */
  redactValue(v: unknown): unknown {
    if (typeof v === "string") return this.redact(v);
    if (Array.isArray(v)) return v.map((item) => this.redactValue(item));
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(v)) out[key] = isSecretKey(key) ? REDACTED : this.redactValue(value);
      return out;
    }
    return v;
  }
}
