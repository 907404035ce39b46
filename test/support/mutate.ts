/**
 * Garbage job files for the fault suite: a valid job file bent in one of several ways a broken
 * editor, a bad generator or a hostile user could bend it. Seeded, so a failing file can be made again.
 */

/** mulberry32: small, fast and good enough to pick mutations; the same seed gives the same files. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Random = () => number;

export const MUTATIONS = ["byte-flip", "truncate", "wrong-type", "huge-number", "huge-string", "deep-nesting", "alias-bomb"] as const;
export type MutationKind = (typeof MUTATIONS)[number];

export interface MutatedFile {
  kind: MutationKind;
  /** What was done, for a failure message. */
  detail: string;
  content: Buffer;
}

/**
 * The job every mutation starts from. It is valid, but disabled and on a yearly schedule: a
 * mutation that leaves it valid must not add runs beside the jobs the test times.
 */
export const BASE_JOB = [
  "description: a job about to be mangled",
  "enabled: false",
  'schedule: "0 0 1 1 *"',
  "prompt: |",
  "  Summarise the inbox for {{date}}.",
  "  Keep it short.",
  "timeout: 30s",
  "overlap: skip",
  "catch_up: 0",
  "retry:",
  "  attempts: 2",
  "  backoff: 5s",
  "tools: [read_file]",
  "deliver_when: non_empty",
  "",
].join("\n");

/** Keys of BASE_JOB whose value a mutation may replace, as `key: value` at the start of a line. */
const KEYS = ["description", "enabled", "schedule", "prompt", "timeout", "overlap", "catch_up", "retry", "tools", "deliver_when"];
/** Numeric keys, some absent from BASE_JOB (they are added). */
const NUMERIC_KEYS = ["timeout", "catch_up", "every", "temperature", "max_tokens", "max_iterations", "retry"];

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const between = (random: Random, low: number, high: number) => low + Math.floor(random() * (high - low + 1));

export function mutateJob(random: Random): MutatedFile {
  const kind = pick(random, MUTATIONS);
  switch (kind) {
    case "byte-flip":
      return byteFlip(random);
    case "truncate": {
      const at = between(random, 0, BASE_JOB.length - 1);
      return { kind, detail: `cut at byte ${at}`, content: Buffer.from(BASE_JOB.slice(0, at)) };
    }
    case "wrong-type": {
      const key = pick(random, KEYS);
      const value = pick(random, ["[1, 2, 3]", "{ a: 1 }", "true", "42", "-7.5", "null", '""', "~", "!!binary aGVsbG8=", "2026-01-01"]);
      return { kind, detail: `${key}: ${value}`, content: Buffer.from(replaceKey(key, value)) };
    }
    case "huge-number": {
      const key = pick(random, NUMERIC_KEYS);
      const value = pick(random, [
        "1e300",
        "1e308",
        "1e400",
        "-1e400",
        "99999999999999999999999999999",
        "0x7fffffffffffffffffff",
        ".inf",
        "-.inf",
        ".nan",
      ]);
      const line = key === "retry" ? `retry:\n  attempts: ${value}\n  backoff: ${value}` : `${key}: ${value}`;
      const content =
        key === "every"
          ? replaceKey("schedule", value, "every")
          : KEYS.includes(key)
            ? replaceKey(key, line.slice(key.length + 2))
            : `${BASE_JOB}${line}\n`;
      return { kind, detail: line, content: Buffer.from(content) };
    }
    case "huge-string":
      return hugeString(random);
    case "deep-nesting":
      return deepNesting(random);
    case "alias-bomb":
      return aliasBomb(random);
  }
}

function byteFlip(random: Random): MutatedFile {
  const bytes = Buffer.from(BASE_JOB);
  const flips = between(random, 1, 8);
  const where: number[] = [];
  for (let i = 0; i < flips; i++) {
    const at = Math.floor(random() * bytes.length);
    bytes[at] = Math.floor(random() * 256);
    where.push(at);
  }
  return { kind: "byte-flip", detail: `bytes ${where.join(", ")}`, content: bytes };
}

/** Around the registry's 256 KiB cap: some strings fit, some make the file too large. */
function hugeString(random: Random): MutatedFile {
  const length = pick(random, [10_000, 100_000, 250_000, 300_000, 1_000_000]);
  const key = pick(random, ["name", "description", "prompt", "schedule", "timezone", "model", "overlap", "x-unknown"]);
  const value = `"${"x".repeat(length)}"`;
  const content = KEYS.includes(key) ? replaceKey(key, value) : `${BASE_JOB}${key}: ${value}\n`;
  return { kind: "huge-string", detail: `${key}: ${length} characters`, content: Buffer.from(content) };
}

function deepNesting(random: Random): MutatedFile {
  const depth = pick(random, [100, 1_000, 10_000, 100_000]);
  const form = pick(random, ["flow-seq", "flow-map", "block"]);
  let value: string;
  if (form === "flow-seq") value = `${"[".repeat(depth)}1${"]".repeat(depth)}`;
  else if (form === "flow-map") value = `${"{a: ".repeat(depth)}1${"}".repeat(depth)}`;
  else {
    // Indentation grows with depth, so block nesting is kept shallow enough to stay under the size cap.
    const levels = Math.min(depth, 600);
    value = Array.from({ length: levels }, (_, i) => `\n${" ".repeat(i + 2)}k${i}:`).join("") + " 1";
  }
  const key = pick(random, ["prompt", "tools", "retry", "deliver"]);
  const content = KEYS.includes(key) ? replaceKey(key, value) : `${BASE_JOB}${key}: ${value}\n`;
  return { kind: "deep-nesting", detail: `${form} ${depth} deep under ${key}`, content: Buffer.from(content) };
}

/** Billion laughs: each level holds several aliases of the one before, so expanding it explodes. */
function aliasBomb(random: Random): MutatedFile {
  const levels = between(random, 3, 9);
  const width = between(random, 3, 10);
  const lines = [`l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]`];
  for (let i = 1; i <= levels; i++) lines.push(`l${i}: &l${i} [${Array.from({ length: width }, () => `*l${i - 1}`).join(", ")}]`);
  const key = pick(random, ["prompt", "tools", "deliver", "description"]);
  const bomb = `${lines.join("\n")}\n${key}: *l${levels}\n`;
  const content = KEYS.includes(key) ? `${bomb}${dropKey(key)}` : `${bomb}${BASE_JOB}`;
  return { kind: "alias-bomb", detail: `${levels} levels of ${width} aliases under ${key}`, content: Buffer.from(content) };
}

/** BASE_JOB with `key`'s value (and any lines indented under it) replaced by `value`, under `as`. */
function replaceKey(key: string, value: string, as = key): string {
  return BASE_JOB.replace(new RegExp(`^${key}:.*(\\n  .*)*`, "m"), `${as}: ${value}`);
}

function dropKey(key: string): string {
  return BASE_JOB.replace(new RegExp(`^${key}:.*(\\n  .*)*\\n`, "m"), "");
}
