import bytes from "bytes";
import ms from "ms";
import * as z from "zod";
import { isTimeZone, MAX_TIME_ZONE_LENGTH } from "../time.js";
import { closeName } from "./yaml-errors.js";

/*
 * The zod fields countd.yaml, job files and delivery targets are written with, and how their
 * messages quote what the user wrote. A module of its own so that the schemas built from it can
 * import one another (config → delivery targets) without a cycle.
 */

/** How a value the user wrote is quoted back in a message. */
export function describeValue(input: unknown): string {
  if (input === undefined || input === null) return "nothing";
  if (Array.isArray(input)) return "a list";
  if (typeof input === "object") return "a mapping";
  // A pasted log or a generated string quoted whole would bury the message (and bloat the log line).
  if (typeof input === "string" && input.length > MAX_QUOTED_LENGTH) {
    return `${quoted(input.slice(0, MAX_QUOTED_LENGTH))}… (${input.length} characters)`;
  }
  return quoted(input);
}

/** JSON's quoting, with what it leaves as is but a terminal or an editor would act on (DEL, C1, bidi controls) escaped too. */
const quoted = (input: unknown): string =>
  (JSON.stringify(input) ?? String(input)).replace(/[\p{C}\p{Zl}\p{Zp}]/gu, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`);

const MAX_QUOTED_LENGTH = 80;

/** What kind of value the user wrote, without quoting it. */
export function describeKind(input: unknown): string {
  if (typeof input === "string") return input === "" ? "nothing" : "text";
  if (typeof input === "number") return "a number";
  if (typeof input === "boolean") return "true or false";
  return describeValue(input);
}

export const expected = (what: string) => ({
  error: (issue: { input?: unknown }) => `expected ${what}, got ${describeValue(issue.input)}`,
});

/** `${VAR}` interpolation always yields a string, so numeric fields take numeric strings too. */
export const numeric = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v)) ? Number(v) : v), schema);

export const positiveInt = () => {
  const message = expected("a positive integer");
  return numeric(z.number(message).int(message).positive(message));
};

export const text = () => z.string(expected("a string")).min(1, expected("a non-empty string"));

/** `${VAR}` yields "true"/"false", so switches take those strings too. */
export const bool = () => z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean(expected("true or false")));

export const envName = () =>
  z.string(expected("an environment variable name")).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, expected("an environment variable name"));

export const list = <T extends z.ZodType>(item: T, what: string) => z.array(item, expected(`a list of ${what}`)).default([]);

export const regex = () =>
  text().refine(
    (pattern) => {
      try {
        new RegExp(pattern);
        return true;
      } catch {
        return false;
      }
    },
    { error: (issue) => `expected a regular expression, got ${describeValue(issue.input)}` },
  );

/** Empty counts as not given: `${VAR:-}` is how a file says "only if set". */
export const unlessEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === "" ? undefined : v), schema.optional());

export const httpURL = z.url({ protocol: /^https?$/, ...expected('an http(s) URL like "https://api.example.com/v1"') });

/**
 * The longest duration taken: far beyond any real timeout or interval, and small enough that a
 * date this far ahead still exists (a scheduler given `every: 1e300` would compute Invalid Dates).
 */
export const MAX_DURATION_MS = 100 * 365 * 24 * 3_600_000;

/** "1s", "10m", "500ms", or a number of seconds; parsed to milliseconds. */
export const duration = ({ allowZero }: { allowZero: boolean }) => {
  const what = `a ${allowZero ? "" : "positive "}duration like "30s", "10m", "500ms" or a number of seconds`;
  return z.union([z.number(), z.string()], expected(what)).transform((value, ctx) => {
    const milliseconds = toMilliseconds(value);
    if (milliseconds === undefined || milliseconds < 0 || (!allowZero && milliseconds === 0)) {
      ctx.issues.push({ code: "custom", input: value, message: `expected ${what}, got ${describeValue(value)}` });
      return z.NEVER;
    }
    if (milliseconds > MAX_DURATION_MS) {
      ctx.issues.push({ code: "custom", input: value, message: `expected a duration of at most 100 years, got ${describeValue(value)}` });
      return z.NEVER;
    }
    return milliseconds;
  });
};

function toMilliseconds(value: number | string): number | undefined {
  const seconds = typeof value === "number" ? value : value.trim() === "" ? Number.NaN : Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  // ms() throws on "" rather than returning undefined.
  if (typeof value === "number" || value.trim() === "") return undefined;
  const parsed = ms(value as ms.StringValue) as number | undefined;
  return parsed !== undefined && Number.isFinite(parsed) ? parsed : undefined;
}

/** "10MB", "512KB", "1.5GB" (units of 1,024), or a number of bytes; parsed to bytes. */
export const byteSize = () => {
  const what = 'a size like "10MB", "512KB" or a number of bytes';
  return z.union([z.number(), z.string()], expected(what)).transform((value, ctx) => {
    const size = typeof value === "number" ? value : bytes.parse(value.trim());
    if (size === null || !Number.isSafeInteger(size) || size <= 0) {
      ctx.issues.push({ code: "custom", input: value, message: `expected ${what}, got ${describeValue(value)}` });
      return z.NEVER;
    }
    return size;
  });
};

/** A section left empty in YAML (`agent:` with every line commented out) is null: treat it as absent. */
export const section = <T extends z.core.$ZodLooseShape>(shape: T) =>
  z.preprocess((v) => v ?? {}, z.strictObject(shape, expected("a mapping")));

export const oneOf = <T extends readonly [string, ...string[]]>(values: T) => z.enum(values, expected(`one of ${values.join(", ")}`));

/** An IANA zone name, checked against this machine's ICU data. */
export const timeZone = () =>
  text().refine(isTimeZone, {
    error: (issue) => {
      const near =
        typeof issue.input === "string" && issue.input.length <= MAX_TIME_ZONE_LENGTH
          ? closeName(issue.input, Intl.supportedValuesOf("timeZone"))
          : undefined;
      return `expected an IANA time zone name like "Asia/Shanghai", got ${describeValue(issue.input)}${near ? ` (did you mean "${near}"?)` : ""}`;
    },
  });
