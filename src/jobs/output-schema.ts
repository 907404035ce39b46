import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { Ajv, ErrorObject, ValidateFunction } from "ajv";
import type { Ajv2020 } from "ajv/dist/2020.js";
import type { Problem } from "../config/yaml-errors.js";
import { errorText } from "../text.js";

/** A job's `output:`: the JSON Schema its answer must satisfy, and how many repair requests an invalid answer gets. */
export interface OutputSpec {
  schema: Record<string, unknown>;
  repair: number;
  /** Where the schema was read from, when `schema:` named a file; shown in messages. */
  file?: string;
}

/** The answer checked: its value, or each error at its JSON pointer (`at /items/0/id: must be string`). */
export type OutputVerdict = { ok: true; value: unknown } | { ok: false; errors: string[] };

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;

/*
 * Strict about the schema (an unknown keyword is a typo the user wants named), quiet about the
 * rest: ajv's "log" checks would write to the console past the daemon's logger.
 */
const OPTIONS = { allErrors: true, strict: true, strictTypes: false, strictTuples: false, logger: false } as const;

/**
 * Loaded with the first `output:` schema: ajv is some 30 ms of every command that reads job
 * files, and most jobs have none. Required, as the checks here are synchronous.
 */
function validators(): { draft07: Ajv; draft2020: Ajv2020 } {
  const require = createRequire(import.meta.url);
  const ajv = require("ajv") as typeof import("ajv");
  const ajv2020 = require("ajv/dist/2020.js") as typeof import("ajv/dist/2020.js");
  const addFormats = require("ajv-formats") as typeof import("ajv-formats");
  const draft07 = new ajv.Ajv(OPTIONS);
  const draft2020 = new ajv2020.Ajv2020(OPTIONS);
  addFormats.default(draft07);
  addFormats.default(draft2020);
  return { draft07, draft2020 };
}

let shared: ReturnType<typeof validators> | undefined;
const compiled = new WeakMap<object, ValidateFunction>();

/**
 * The schema's validator, compiled once per schema object. JSON Schema 2020-12 unless the schema's
 * `$schema` names draft-07. Throws, naming the problem, when the schema is not a valid one.
 */
export function outputValidator(schema: Record<string, unknown>): ValidateFunction {
  let validate = compiled.get(schema);
  if (validate) return validate;
  shared ??= validators();
  const ajv = typeof schema.$schema === "string" && DRAFT_07.test(schema.$schema) ? shared.draft07 : shared.draft2020;
  validate = ajv.compile(schema);
  compiled.set(schema, validate);
  return validate;
}

/** `value` checked against the job's schema. */
export function checkOutput(spec: OutputSpec, value: unknown): OutputVerdict {
  const validate = outputValidator(spec.schema);
  return validate(value) ? { ok: true, value } : { ok: false, errors: (validate.errors ?? []).map(errorAt) };
}

/** One ajv error as `at /pointer: message`, the pointer `/` for the whole value. */
function errorAt(error: ErrorObject): string {
  const extra = error.keyword === "additionalProperties" ? ` (${JSON.stringify(error.params.additionalProperty)})` : "";
  return `at ${error.instancePath || "/"}: ${error.message ?? error.keyword}${extra}`;
}

/**
 * The job file's `output:` read into an OutputSpec: a schema written inline, or read from a JSON
 * file named relative to the job file; compiled once here, so a bad schema is a problem of the
 * job file at `output.schema`, not a failure of its first run.
 */
export function loadOutputSpec(
  written: { schema: string | Record<string, unknown>; repair: number },
  jobFile: string,
  problems: Problem[],
): OutputSpec | undefined {
  const at = ["output", "schema"];
  let schema: unknown = written.schema;
  let file: string | undefined;
  if (typeof written.schema === "string") {
    file = path.resolve(path.dirname(jobFile), written.schema);
    try {
      schema = JSON.parse(readFileSync(file, "utf8"));
    } catch (err) {
      problems.push({ path: at, message: `cannot read the schema file ${file}: ${errorText(err)}` });
      return undefined;
    }
    if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
      problems.push({ path: at, message: `the schema file ${file} does not hold a JSON Schema (a JSON object)` });
      return undefined;
    }
  }
  const spec: OutputSpec = { schema: schema as Record<string, unknown>, repair: written.repair, ...(file ? { file } : {}) };
  try {
    outputValidator(spec.schema);
  } catch (err) {
    problems.push({ path: at, message: `not a valid JSON Schema${file ? ` (${file})` : ""}: ${errorText(err)}` });
    return undefined;
  }
  return spec;
}
