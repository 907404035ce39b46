import { isScalar } from "yaml";
import { formatPath, type Problem, type YamlPath, type YamlSource } from "../config/yaml-errors.js";
import { DeliveryError } from "./errors.js";
import { filledInProblem, type DeliveryTarget, type ReferenceField, type WebhookFormat } from "./targets.js";

/*
 * Delivery targets keep their `${VAR}` references as written all the way into the outbox; they
 * are filled in here, just before sending, so a secret never reaches the state directory. The
 * grammar is countd.yaml's (config/interpolate.ts): `${NAME}` and `${NAME:-default}`, a default
 * also standing in for a variable set to "".
 */
const REFERENCE = /\$\{([^}]*)\}/g;
const NAME_AND_DEFAULT = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;
const UNCLOSED = /\$\{[^}]*$/;

/** A value of a target that may hold references; `path` is inside the target (`["headers", "X-Token"]`). */
interface Field {
  path: (string | number)[];
  field: ReferenceField;
  value: string;
}

/** One thing wrong with a field; `reference` is the spelling it is about, when it is about one. */
interface FieldProblem {
  message: string;
  reference?: string;
  /** The variable, when the problem is that it is unset. */
  unset?: string;
}

function fieldsOf(target: DeliveryTarget): Field[] {
  if (target.kind === "email") {
    return (["to", "cc", "bcc"] as const).flatMap((list) =>
      target[list].map((value, index): Field => ({ path: [list, index], field: "address", value })),
    );
  }
  return [
    { path: ["url"], field: "url", value: target.url },
    ...(target.secret !== undefined ? [{ path: ["secret"], field: "secret" as const, value: target.secret }] : []),
    ...Object.entries(target.headers).map(([name, value]): Field => ({ path: ["headers", name], field: "header", value })),
  ];
}

/**
 * `field`'s value with its references filled in from `env`, and what is wrong with it; the value
 * is never quoted. `env` null: nothing is looked up, only the references' form is checked.
 * `declared`: the only names that may be referred to; any other is a problem and is not looked up.
 */
function fill(
  field: Field,
  format: WebhookFormat,
  env: NodeJS.ProcessEnv | null,
  declared?: readonly string[],
): { value: string; unset: string[]; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const unset: string[] = [];
  const names: string[] = [];
  const unclosed = UNCLOSED.exec(field.value);
  if (unclosed) problems.push({ reference: unclosed[0], message: `unclosed variable reference "${unclosed[0]}": missing "}"` });
  const value = field.value.replace(REFERENCE, (reference, inner: string) => {
    const parsed = NAME_AND_DEFAULT.exec(inner);
    if (!parsed) {
      problems.push({ reference, message: `invalid variable reference "${reference}": expected \${NAME} or \${NAME:-default}` });
      return reference;
    }
    const [, name = "", fallback] = parsed;
    if (declared && !declared.includes(name)) {
      problems.push({
        reference,
        message: `environment variable ${name} is not listed in job_env (countd.yaml): a job file may refer only to the variables listed there`,
      });
      return reference;
    }
    if (env === null) return reference;
    names.push(name);
    const set = env[name];
    if (set !== undefined && set !== "") return set;
    if (fallback !== undefined) return fallback;
    if (set === undefined) {
      unset.push(name);
      problems.push({ reference, message: `environment variable ${name} is not set`, unset: name });
    }
    return "";
  });
  if (problems.length === 0 && names.length > 0) {
    const problem = filledInProblem(field.field, value, format);
    if (problem) problems.push({ message: `${problem} (filled in from ${[...new Set(names)].join(", ")}; the value is not shown here)` });
  }
  return { value, unset, problems };
}

const formatOf = (target: DeliveryTarget): WebhookFormat => (target.kind === "webhook" ? target.format : "json");
const referring = (target: DeliveryTarget) => fieldsOf(target).filter((field) => field.value.includes("${"));

/**
 * `target` ready to send: every `${VAR}` filled in from `env` (a secret that comes out empty is
 * no secret). A variable that is unset, or a value that is not of its field's form once filled
 * in, throws a permanent DeliveryError naming the variable and never showing a value.
 */
export function resolveTarget<T extends DeliveryTarget>(target: T, env: NodeJS.ProcessEnv): T {
  const resolved = structuredClone(target);
  const problems: string[] = [];
  for (const field of referring(target)) {
    const filled = fill(field, formatOf(target), env);
    problems.push(...filled.problems.map((problem) => `${formatPath([target.kind, ...field.path])}: ${problem.message}`));
    setIn(resolved, field.path, filled.value);
  }
  if (problems.length > 0) {
    throw new DeliveryError(`${problems.join("; ")}: fix the environment, restart countd, then run \`countd outbox retry\``, {
      permanent: true,
    });
  }
  if (resolved.kind === "webhook" && resolved.secret === "") delete resolved.secret;
  return resolved;
}

/** The variables `target` refers to without a default that `env` does not set, each once. */
export function unresolvedVariables(target: DeliveryTarget, env: NodeJS.ProcessEnv): string[] {
  return [...new Set(referring(target).flatMap((field) => fill(field, formatOf(target), env).unset))];
}

/**
 * What `countd validate` and the loaders report about the references of `targets`, read from
 * `source` at `at` (e.g. `["deliver"]`): an unset variable, one not `declared` (when a list is
 * given) or a malformed reference, placed on the reference itself; a value not of its field's
 * form once filled in (e.g. a secret without `whsec_`), placed on the value. `env` null: no
 * variable is looked up, for commands that send nothing.
 */
export function referenceProblems(
  targets: readonly DeliveryTarget[],
  env: NodeJS.ProcessEnv | null,
  source: YamlSource,
  at: YamlPath,
  declared?: readonly string[],
): Problem[] {
  return targets.flatMap((target, index) =>
    referring(target).flatMap((field) =>
      placed(field, formatOf(target), env, source, [...at, index, target.kind, ...field.path], declared),
    ),
  );
}

/**
 * referenceProblems for one value outside a delivery target (a webhook trigger's secret, at
 * `path`), checked as a Standard Webhooks secret once filled in; also a literal's form.
 */
export function secretReferenceProblems(
  value: string,
  env: NodeJS.ProcessEnv | null,
  source: YamlSource,
  path: YamlPath,
  declared: readonly string[],
): Problem[] {
  if (!value.includes("${")) {
    const problem = filledInProblem("secret", value, "json");
    return problem ? [{ path, message: `${problem} (the value is not shown here)` }] : [];
  }
  return placed({ path: [], field: "secret", value }, "json", env, source, path, declared);
}

/** A Standard Webhooks secret with its references filled in from `env`, or why it cannot be: an unset variable or an empty value. */
export function resolveSecret(value: string, env: NodeJS.ProcessEnv): { secret: string } | { problem: string } {
  const filled = fill({ path: [], field: "secret", value }, "json", env);
  if (filled.problems.length > 0) return { problem: filled.problems.map((problem) => problem.message).join("; ") };
  return filled.value === "" ? { problem: "the secret is empty" } : { secret: filled.value };
}

/** `field`'s problems, each placed on its reference in `source` when the source shows it, else on the value at `path`. */
function placed(
  field: Field,
  format: WebhookFormat,
  env: NodeJS.ProcessEnv | null,
  source: YamlSource,
  path: YamlPath,
  declared?: readonly string[],
): Problem[] {
  const { problems } = fill(field, format, env, declared);
  // A job file read from the cache is parsed only when there is something to place in it.
  if (problems.length === 0) return [];
  const node = source.doc.getIn(path, true);
  const [start, end] = isScalar(node) && node.range ? node.range : [undefined, undefined];
  const raw = start !== undefined ? source.text.slice(start, end) : "";
  let from = 0;
  return problems.map((problem): Problem => {
    const found = problem.reference !== undefined && start !== undefined ? raw.indexOf(problem.reference, from) : -1;
    if (found >= 0) from = found + problem.reference!.length;
    return {
      path: [...path],
      message: problem.message,
      ...(found >= 0 ? { offset: start! + found } : {}),
      ...(problem.unset !== undefined ? { unset: problem.unset } : {}),
    };
  });
}

function setIn(target: DeliveryTarget, path: readonly (string | number)[], value: string): void {
  let node = target as unknown as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = value;
}
