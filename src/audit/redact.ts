export const REDACTED = "[REDACTED]";

/** Shorter values would blank out ordinary words and numbers all over the log. */
const MIN_SECRET_LENGTH = 4;

/**
 * Encoded forms are looked for only for secrets this long: a shorter one's base64 runs to a few
 * characters that turn up by chance in any other base64 text.
 */
const MIN_ENCODED_LENGTH = 8;

/**
 * The base64 (standard and url-safe) and hex forms a secret takes when a tool or the model encodes
 * it: alone (padded and not), and inside a longer encoded text (`user:secret` in a Basic header),
 * where it starts at one of three offsets within a 3-byte group. For each offset only the
 * characters made of the secret's bits alone are kept, since the others depend on its neighbours.
 */
function encodedForms(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const base64: string[] = [bytes.toString("base64"), bytes.toString("base64").replace(/=+$/, "")];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64");
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    base64.push(encoded.slice(first, end));
  }
  const urlSafe = base64.map((form) => form.replace(/\+/g, "-").replace(/\//g, "_"));
  const hex = bytes.toString("hex");
  return [...base64, ...urlSafe, hex, hex.toUpperCase()];
}

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

/**
 * Removes known secret values (from the environment and config: provider keys, `secrets:`,
 * `job_env`, MCP servers' env and headers, smtp and Redis passwords), raw, JSON-escaped, and in
 * base64 and hex, from anything about to be written or sent. The forms are compiled into one
 * pattern once, so a redaction is one pass over the text.
 */
export class Redactor {
  private readonly pattern: RegExp | undefined;
  /** Every form a secret is replaced in, longest first. */
  private readonly forms: string[];

  constructor(secrets: string[]) {
    const forms = new Set<string>();
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      forms.add(secret);
      // Inside serialised JSON a value with quotes, backslashes or control characters appears escaped.
      forms.add(JSON.stringify(secret).slice(1, -1));
      if (secret.length >= MIN_ENCODED_LENGTH) for (const form of encodedForms(secret)) forms.add(form);
    }
    // Longest first, so a secret that contains another is replaced whole.
    this.forms = [...forms].sort((a, b) => b.length - a.length);
    this.pattern = this.forms.length > 0 ? new RegExp(this.forms.map(escapeRegExp).join("|"), "g") : undefined;
  }

  /**
   * For text that arrives in pieces (a streamed answer), redacted piece by piece: `ready` is the
   * part that can be shown now, redacted; `held` is the end that could be the start of a secret the
   * next piece completes, to be put before that piece (or shown, redacted, when no piece follows).
   * Each piece redacted alone would let a secret split across two pieces through in halves.
   */
  redactStreamed(text: string): { ready: string; held: string } {
    if (!this.pattern) return { ready: text, held: "" };
    let afterLast = 0;
    for (const match of text.matchAll(this.pattern)) afterLast = match.index + match[0].length;
    const longest = this.forms[0]!.length;
    let cut = text.length;
    for (let start = Math.max(afterLast, text.length - longest + 1); start < text.length; start++) {
      const tail = text.slice(start);
      if (this.forms.some((form) => form.startsWith(tail))) {
        cut = start;
        break;
      }
    }
    return { ready: this.redact(text.slice(0, cut)), held: text.slice(cut) };
  }

  redact(text: string): string {
    return this.pattern ? text.replace(this.pattern, REDACTED) : text;
  }

  /** A copy with secret values replaced in every string; keys and the shape stay (for records countd reads back). */
  redactStrings<T>(v: T): T {
    if (!this.pattern) return v;
    if (typeof v === "string") return this.redact(v) as T;
    if (Array.isArray(v)) return v.map((item: unknown) => this.redactStrings(item)) as T;
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(v)) out[key] = this.redactStrings(value);
      return out as T;
    }
    return v;
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
