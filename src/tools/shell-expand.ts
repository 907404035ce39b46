/**
 * Word expansion as bash does it before a command runs, for the parts known before the line
 * runs: quote removal, `$'…'` escapes and brace expansion. A part decided at run time (a
 * variable, `$(…)`, an extglob) leaves the word's value unknown, with its literal start kept.
 */

import type * as Sh from "mvdan-sh";
import type { ShellSyntax, Source } from "./shell-syntax.js";

const BRACE_SEQUENCE = /^\{(-?\d+\.\.-?\d+|[A-Za-z]\.\.[A-Za-z])(\.\.-?\d+)?\}$/;

const MAX_BRACE_WORDS = 256;

/** A word of a command after quote removal and brace expansion. */
export interface Arg {
  /** Undefined when part of the word is decided at run time (a variable, `$(…)`, an extglob). */
  value: string | undefined;
  /** The literal text before the first part decided at run time (all of it when `value` is set). */
  prefix: string;
  /** Holds an unquoted `*`, `?` or `[`: the shell may turn it into other words. */
  pattern: boolean;
  /** The word as written. */
  shown: string;
}

/**
 * Whether `word` holds a brace group with `..` that is not a plain sequence. The parser reads
 * `{rm,-rf,../x}` as a broken sequence, bash as a list: such a group is read differently, and
 * may reach a parent folder.
 */
export function misreadBraces(syntax: ShellSyntax, word: Sh.Word): boolean {
  for (const part of word.Parts) {
    if (syntax.NodeType(part) !== "Lit") continue;
    for (const [group] of (part as Sh.Lit).Value.matchAll(/(?<!\\)\{[^{}]*\}/g)) {
      if (group.includes("..") && !BRACE_SEQUENCE.test(group)) return true;
    }
  }
  return false;
}

/** The words `word` becomes: one per brace expansion, or one with an unknown value. */
export function expandWord(syntax: ShellSyntax, word: Sh.Word, src: Source): Arg[] {
  const shown = src.of(word);
  const parts = word.Parts;
  const split = syntax.SplitBraces(word).Parts;
  // SplitBraces rewrites the word in place, and Walk fails on the BraceExp nodes it adds.
  word.Parts = parts;
  const words = expandParts(syntax, split);
  if (!words || words.length > MAX_BRACE_WORDS) {
    return [{ value: undefined, prefix: literalPrefix(syntax, word.Parts), pattern: false, shown }];
  }
  return words.map(({ text, pattern }) => ({ value: text, prefix: text, pattern, shown }));
}

interface Expansion {
  text: string;
  pattern: boolean;
}

/** Every word the parts expand to, or undefined when one part is decided at run time. */
function expandParts(syntax: ShellSyntax, parts: Sh.Node[]): Expansion[] | undefined {
  let words: Expansion[] = [{ text: "", pattern: false }];
  for (const part of parts) {
    const options = expandPart(syntax, part);
    if (!options) return undefined;
    words = words.flatMap((w) => options.map((o) => ({ text: w.text + o.text, pattern: w.pattern || o.pattern })));
    if (words.length > MAX_BRACE_WORDS) return undefined;
  }
  return words;
}

function expandPart(syntax: ShellSyntax, part: Sh.Node): Expansion[] | undefined {
  switch (syntax.NodeType(part)) {
    case "Lit": {
      const raw = (part as Sh.Lit).Value;
      const text = raw.replace(/\\\n/g, "").replace(/\\(.)/gs, "$1");
      return [{ text, pattern: /[*?[]/.test(raw.replace(/\\./gs, "")) }];
    }
    case "SglQuoted": {
      const quoted = part as Sh.SglQuoted;
      return [{ text: quoted.Dollar ? ansiC(quoted.Value) : quoted.Value, pattern: false }];
    }
    case "DblQuoted": {
      let text = "";
      for (const inner of (part as Sh.DblQuoted).Parts) {
        if (syntax.NodeType(inner) !== "Lit") return undefined;
        text += (inner as Sh.Lit).Value.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === "\n" ? "" : c));
      }
      return [{ text, pattern: false }];
    }
    case "BraceExp": {
      const brace = part as Sh.BraceExp;
      if (brace.Sequence) return braceSequence(syntax, brace.Elems);
      const all: Expansion[] = [];
      for (const elem of brace.Elems) {
        const words = expandParts(syntax, elem!.Parts);
        if (!words) return undefined;
        all.push(...words);
      }
      return all;
    }
    default:
      return undefined;
  }
}

/** `{1..5}`, `{a..e}`, `{0..10..2}`. */
function braceSequence(syntax: ShellSyntax, elems: Sh.BraceExp["Elems"]): Expansion[] | undefined {
  const [from, to, step] = elems.map((elem) => {
    const words = expandParts(syntax, elem!.Parts);
    return words?.length === 1 ? words[0]!.text : undefined;
  });
  if (from === undefined || to === undefined) return undefined;
  const numeric = /^-?\d+$/.test(from) && /^-?\d+$/.test(to);
  const start = numeric ? Number(from) : from.codePointAt(0)!;
  const end = numeric ? Number(to) : to.codePointAt(0)!;
  const stride = Math.abs(Number(step ?? 1)) || 1;
  if (Math.abs(end - start) / stride > MAX_BRACE_WORDS) return undefined;
  const out: Expansion[] = [];
  for (let n = start; start <= end ? n <= end : n >= end; n += start <= end ? stride : -stride) {
    out.push({ text: numeric ? String(n) : String.fromCodePoint(n), pattern: false });
  }
  return out;
}

function literalPrefix(syntax: ShellSyntax, parts: Sh.Node[]): string {
  let prefix = "";
  for (const part of parts) {
    const words = expandPart(syntax, part);
    if (!words || words.length !== 1) break;
    prefix += words[0]!.text;
  }
  return prefix;
}

const ANSI_ESCAPES: Record<string, string> = {
  a: "\x07",
  b: "\b",
  e: "\x1b",
  E: "\x1b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
  "\\": "\\",
  "'": "'",
  '"': '"',
  "?": "?",
};

/** The value of a `$'…'` string. */
function ansiC(text: string): string {
  return text.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/gs, (whole, esc: string) => {
    const kind = esc[0]!;
    if (kind === "x" || kind === "u" || kind === "U") return String.fromCodePoint(Math.min(parseInt(esc.slice(1), 16), 0x10ffff));
    if (kind === "c" && esc.length === 2) return String.fromCharCode(esc.charCodeAt(1) & 31);
    if (/[0-7]/.test(kind)) return String.fromCharCode(parseInt(esc, 8) & 0xff);
    return ANSI_ESCAPES[esc] ?? whole;
  });
}

/** A word known in full, as a wrapper or a runner hands it on. */
export function literal(text: string): Arg {
  return { value: text, prefix: text, pattern: false, shown: text };
}

/** The words as one, the way `watch` joins its operands into a line for the shell. */
export function joined(args: Arg[]): Arg {
  const known = args.every((arg) => arg.value !== undefined);
  const text = args.map((arg) => arg.value ?? arg.shown).join(" ");
  return { value: known ? text : undefined, prefix: "", pattern: false, shown: text };
}
