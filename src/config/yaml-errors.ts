import { closestMatch } from "leven";
import { CST, isMap, isPair, isScalar, isSeq, Lexer, LineCounter, parseDocument, type Document, type Node, type Pair } from "yaml";
import type { z } from "zod";

/** Key path into a YAML document, as zod reports it: map keys and sequence indexes. */
export type YamlPath = readonly PropertyKey[];

/** A parsed YAML file kept with what is needed to point back into its text. */
export interface YamlSource {
  /** The file name as the user should see it in messages. */
  name: string;
  text: string;
  doc: Document.Parsed;
  lineCounter: LineCounter;
}

/** One thing wrong with a file, before it is given a position. */
export interface Problem {
  path: YamlPath;
  message: string;
  /** Where the problem sits in the text, when finer than the node at `path` (e.g. inside a string). */
  offset?: number;
  /** Point at the key rather than its value: right for unknown keys. */
  at?: "key" | "value";
  /** The environment variable whose being unset is the problem: the commands that send decide what that costs. */
  unset?: string;
}

/**
 * `recovered`: when the only syntax errors are `${VAR}` references left unquoted in a flow
 * collection (`to: [${REPORT_TO}]`), the file as it reads with them quoted, and a problem on each,
 * so that the file's other problems can be listed too.
 */
export function parseYaml(
  name: string,
  text: string,
): { source: YamlSource; syntaxErrors: string[]; recovered?: { source: YamlSource; problems: Problem[] } } {
  const source = parsed(name, text);
  const { errors } = source.doc;
  // YAML reads the "{" of an unquoted reference as the start of a mapping: the error lands inside the reference, or just after it.
  const references = [...text.matchAll(/\$\{[^}\n]*\}/g)].filter((ref) =>
    errors.some((error) => error.pos[0] > ref.index && error.pos[0] <= ref.index + ref[0].length + 1),
  );
  const inReference = (offset: number) => references.some((ref) => offset > ref.index && offset <= ref.index + ref[0].length + 1);
  const unquoted = (ref: RegExpMatchArray) =>
    `${ref[0]} must be quoted here: YAML reads its "{" as the start of a mapping; write "${ref[0]}" (e.g. to: ["${ref[0]}"])`;
  const syntaxErrors = [
    ...references.map((ref) => ({ at: ref.index!, message: unquoted(ref) })),
    ...errors.filter((error) => !inReference(error.pos[0])).map((error) => ({ at: error.pos[0], message: error.message })),
  ]
    .sort((a, b) => a.at - b.at)
    .map((error) => `${position(source, error.at)}: ${error.message}`);
  if (references.length === 0 || errors.some((error) => !inReference(error.pos[0]))) return { source, syntaxErrors };
  // Quoting shifts what follows on the line by two columns per reference: the other problems' places stay close enough to find.
  let quotedText = text;
  for (const ref of [...references].reverse())
    quotedText = `${quotedText.slice(0, ref.index)}"${ref[0]}"${quotedText.slice(ref.index! + ref[0].length)}`;
  const quoted = parsed(name, quotedText);
  if (quoted.doc.errors.length > 0) return { source, syntaxErrors };
  const problems = references.map((ref, i): Problem => ({ path: [], offset: ref.index! + 2 * i, message: unquoted(ref) }));
  return { source, syntaxErrors, recovered: { source: quoted, problems } };
}

function parsed(name: string, text: string): YamlSource {
  const lineCounter = new LineCounter();
  // prettyErrors would append a snippet to each message; the position is given up front instead.
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  return { name, text, doc, lineCounter };
}

/**
 * `name:line:col: …` where `text` opens its `max + 1`-th nested collection, or undefined. Found by
 * yaml's lexer alone, which is cheap: its composer recurses once per level, so 200 KB of `[[[[`
 * costs it a second and hundreds of megabytes before the stack overflows. Counts flow brackets and
 * the `-` and `?` indicators that open block collections on one line (`- - - x`); nesting by
 * indentation alone is kept shallow by the size of the file.
 */
export function nestingProblem(name: string, text: string, max: number): string | undefined {
  let offset = 0;
  let flow = 0;
  let onLine = 0;
  for (const token of new Lexer().lex(text)) {
    const type = CST.tokenType(token);
    if (type === "flow-map-start" || type === "flow-seq-start") flow++;
    else if (type === "flow-map-end" || type === "flow-seq-end") flow = Math.max(flow - 1, 0);
    else if (type === "seq-item-ind" || type === "explicit-key-ind") onLine++;
    else if (type === "newline") onLine = 0;
    if (flow + onLine > max) {
      const line = text.slice(0, offset).split("\n").length;
      return `${name}:${line}:${offset - text.lastIndexOf("\n", offset - 1)}: nested more than ${max} levels deep`;
    }
    // The lexer's markers (document start, scalar, flow error end) stand for no text of their own.
    if (type !== "doc-mode" && type !== "scalar" && type !== "flow-error-end") offset += token.length;
  }
  return undefined;
}

/** `a.b[2].c` — the form users see for key paths; each key shown as keyExcerpt shows it. */
export function formatPath(path: YamlPath): string {
  return path
    .map((part, i) => (typeof part === "number" ? `[${part}]` : i === 0 ? keyExcerpt(String(part)) : `.${keyExcerpt(String(part))}`))
    .join("");
}

/** Longer than any key countd knows: the start of a longer one is enough to find it. */
const MAX_KEY_EXCERPT = 32;

/**
 * A key as a message may show it: at most its first 32 characters, with control, format and
 * line-separator characters escaped. A file that is not what it claims to be (a job file linked
 * to /etc/shadow, whose lines YAML reads as keys) would otherwise be printed into the log.
 */
export function keyExcerpt(key: string): string {
  const chars = [...key];
  const shown = chars
    .slice(0, MAX_KEY_EXCERPT)
    .join("")
    .replace(/[\p{C}\p{Zl}\p{Zp}]/gu, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`);
  return chars.length > MAX_KEY_EXCERPT ? `${shown}…` : shown;
}

/** `file:line:col: path: message`; without a source (no file at all), `path: message`. */
export function formatProblem(source: YamlSource | undefined, problem: Problem): string {
  const where = problem.path.length > 0 ? `${formatPath(problem.path)}: ` : "";
  return source ? `${position(source, offsetOf(source, problem))}: ${where}${problem.message}` : `${where}${problem.message}`;
}

/** One line per problem, in the order they appear in the file. */
export function formatProblems(source: YamlSource | undefined, problems: readonly Problem[]): string[] {
  const ordered = source ? [...problems].sort((a, b) => offsetOf(source, a) - offsetOf(source, b)) : problems;
  return ordered.map((problem) => formatProblem(source, problem));
}

/**
 * Zod issues as problems; an unknown-keys issue becomes one problem per key, placed on the key,
 * with the closest key `schema` knows there when one is close (`promt` → `prompt`).
 */
export function zodProblems(error: z.ZodError, schema?: z.ZodType): Problem[] {
  return error.issues.flatMap((issue): Problem[] => {
    if (issue.code !== "unrecognized_keys") return [{ path: issue.path, message: issue.message }];
    const known = schema ? keysAt(schema, issue.path) : [];
    return issue.keys.map((key) => {
      const near = closeKey(key, known);
      return { path: [...issue.path, key], message: near ? `unknown key (did you mean "${near}"?)` : "unknown key", at: "key" as const };
    });
  });
}

/**
 * The known key nearest to `key` when it is a likely typo of it: one edit away for short keys,
 * two for longer ones or for the same letters swapped (`ulr`), case and `-` for `_` ignored.
 */
export function closeKey(key: string, known: readonly string[]): string | undefined {
  return closeMatch(key.toLowerCase().replaceAll("-", "_"), known);
}

/** The known name nearest to `name` as closeKey finds it, case ignored: for values such as time zones (`europe/berln`). */
export function closeName(name: string, known: readonly string[]): string | undefined {
  const lower = known.map((candidate) => candidate.toLowerCase());
  const near = closeMatch(name.toLowerCase(), lower);
  return near === undefined ? undefined : known[lower.indexOf(near)];
}

function closeMatch(plain: string, known: readonly string[]): string | undefined {
  // Cheap for any key: a huge one (a pasted file) costs one length check per candidate.
  const sameLength = known.filter((candidate) => candidate.length === plain.length);
  const letters = (word: string) => [...word].sort().join("");
  return (
    known.find((candidate) => candidate === plain) ??
    closestMatch(plain, known, { maxDistance: plain.length <= 4 ? 1 : 2 }) ??
    (sameLength.length > 0
      ? closestMatch(
          plain,
          sameLength.filter((candidate) => letters(candidate) === letters(plain)),
          { maxDistance: 2 },
        )
      : undefined)
  );
}

/** The keys of the mapping `schema` expects at `path`, through the wrappers zod puts around it. */
export function keysAt(schema: z.ZodType, path: YamlPath): string[] {
  let node: z.core.$ZodType = schema;
  for (const part of path) {
    const def: z.core.$ZodTypeDef = unwrap(node)._zod.def;
    const next: z.core.$ZodType | undefined =
      def.type === "array" && typeof part === "number"
        ? (def as z.core.$ZodArrayDef).element
        : def.type === "object" && typeof part === "string"
          ? ((def as z.core.$ZodObjectDef).shape[part] ?? (def as z.core.$ZodObjectDef).catchall)
          : undefined;
    if (!next) return [];
    node = next;
  }
  const def: z.core.$ZodTypeDef = unwrap(node)._zod.def;
  return def.type === "object" ? Object.keys((def as z.core.$ZodObjectDef).shape) : [];
}

/** The schema inside optional, default, preprocess, transform and similar wrappers. */
function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let node = schema;
  for (;;) {
    const def: z.core.$ZodTypeDef & { innerType?: z.core.$ZodType; in?: z.core.$ZodType; out?: z.core.$ZodType } = node._zod.def;
    if (def.innerType) node = def.innerType;
    else if (def.type === "pipe" && def.in && def.out) node = def.in._zod.def.type === "transform" ? def.out : def.in;
    else return node;
  }
}

/** The `file:line:col: path: message` lines for a zod error raised while validating `source`. */
export function zodErrorLines(error: z.ZodError, source: YamlSource): string[] {
  return formatProblems(source, zodProblems(error));
}

function offsetOf(source: YamlSource, problem: Problem): number {
  return problem.offset ?? nodeOffset(source, problem.path, problem.at ?? "value");
}

function position(source: YamlSource, offset: number): string {
  const { line, col } = source.lineCounter.linePos(offset);
  return `${source.name}:${line}:${col}`;
}

/**
 * Offset of the node at `path`. A path that leads nowhere (a missing key) falls back to the
 * deepest part that exists, so "required" problems point at the section that lacks the key.
 */
export function nodeOffset(source: YamlSource, path: YamlPath, at: "key" | "value"): number {
  let node: unknown = source.doc.contents;
  let pair: Pair | undefined;
  let offset = rangeStart(node) ?? 0;
  for (const part of path) {
    const found = child(node, part);
    if (!found) return offset;
    ({ node, pair } = found);
    offset = rangeStart(node) ?? rangeStart(pair?.key) ?? offset;
  }
  return at === "key" ? (rangeStart(pair?.key) ?? offset) : offset;
}

function child(node: unknown, part: PropertyKey): { node: unknown; pair?: Pair } | undefined {
  if (isMap(node)) {
    const pair = node.items.find((item) => isPair(item) && isScalar(item.key) && String(item.key.value) === String(part));
    return pair ? { node: pair.value, pair } : undefined;
  }
  if (isSeq(node) && typeof part === "number") {
    const item: unknown = node.items[part];
    return item === undefined ? undefined : { node: item };
  }
  return undefined;
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null | undefined)?.range?.[0];
}
