import { basename } from "node:path";
import picomatch from "picomatch";
import type { Arg } from "../tools/shell-expand.js";
import { ToolRefusal } from "../tools/paths.js";
import { Scan } from "../tools/shell-scan.js";
import type { ShellSyntax } from "../tools/shell-syntax.js";
import type { ExecPattern } from "./rules.js";

/** `*` matches `/` and a leading dot inside a word: a word is not a path here. */
const WORD_GLOB = { bash: true, dot: true } as const;

/** The pattern word that stands for any number of words, none included. */
const ANY_WORDS = "*";

/** What the parser makes of a command line: its simple commands, and why it could not read all of it. */
export interface ReadLine {
  commands: Arg[][];
  unreadable?: string;
}

/**
 * The simple commands of `line`, as the shell policy's scan lists them: every command of a list,
 * pipeline, subshell or substitution, and the commands a wrapper (`env`, `sudo`, `sh -c`, `xargs`,
 * `find -exec`) runs in turn, each after quote removal. A line the scan refuses (a syntax error, a
 * command name decided at run time) is unreadable: only the commands found before that are listed.
 */
export function readLine(line: string, syntax: ShellSyntax): ReadLine {
  // Deny-list mode reads the widest set of lines; cwd and PATH matter only to allow-list mode.
  const scan = new Scan(syntax, undefined, { cwd: "/", pathDirs: [] });
  try {
    scan.source(line, 0);
    scan.finish();
    return { commands: scan.commands };
  } catch (err) {
    if (!(err instanceof ToolRefusal)) throw err;
    return { commands: scan.commands, unreadable: err.message.replace(/^refused: /, "") };
  }
}

/**
 * Whether the command's words fit the pattern. A word the scan could not resolve (a variable, a
 * substitution, a file-name pattern) may become any words, none included, so it fits anything:
 * an unknown word errs toward asking. The program is compared by its base name unless the
 * pattern names a path.
 */
export function commandMatches(pattern: ExecPattern, argv: Arg[]): boolean {
  const words = argv.map((arg, i) => {
    if (arg.value === undefined || arg.pattern) return undefined;
    return i === 0 && !pattern[0]!.includes("/") ? basename(arg.value) : arg.value;
  });
  const failed = new Set<number>();
  const fits = (p: number, w: number): boolean => {
    const key = p * (words.length + 1) + w;
    if (failed.has(key)) return false;
    const word = words[w];
    let ok: boolean;
    if (p === pattern.length) ok = words.slice(w).every((rest) => rest === undefined);
    else if (pattern[p] === ANY_WORDS) ok = fits(p + 1, w) || (w < words.length && fits(p, w + 1));
    else if (w === words.length) ok = false;
    else if (word === undefined) ok = fits(p, w + 1) || fits(p + 1, w);
    else ok = picomatch.isMatch(word, pattern[p]!, WORD_GLOB) && fits(p + 1, w + 1);
    if (!ok) failed.add(key);
    return ok;
  };
  return fits(0, 0);
}

/** A command's words as a message shows them. */
export function commandText(argv: Arg[]): string {
  return argv.map((arg) => arg.value ?? arg.shown).join(" ");
}
