/**
 * What builtins change that no word of the line shows: shell options, which change how bash reads
 * what follows, and variables written without an assignment.
 */
import type { Arg } from "./shell-expand.js";
import { refusal } from "./shell-refusal.js";
import { SAFE_SET_LETTERS, SAFE_SET_OPTIONS } from "./shell-rules.js";

/** Whether shopt or set -o/+o changes how bash reads what follows (globskipdots, extglob, posix, keyword...). */
export function changesShellOptions(program: string, args: Arg[]): boolean {
  if (program === "shopt" && args.some((arg) => arg.value === undefined || /^-[a-z]*[su]/.test(arg.value))) return true;
  if (program !== "set") return false;
  for (let i = 0; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined) return true;
    if (value === "--" || value === "-" || !/^[-+]/.test(value)) return false;
    for (let k = 1; k < value.length; k++) {
      const letter = value[k]!;
      if (letter === "o") {
        const name = args[++i];
        if (name && !SAFE_SET_OPTIONS.has(name.value ?? "")) return true;
      } else if (!SAFE_SET_LETTERS.includes(letter)) return true;
    }
  }
  return false;
}

/**
 * The variables that builtins write without an assignment word the parser shows: read, mapfile,
 * printf -v, getopts (undefined: a name decided at run time). Their values are known only at run
 * time; in allow-list mode the names they write must not be ones that change which code runs
 * (PATH...). `shown`: the command, for a refusal.
 */
export function variablesWritten(program: string, args: Arg[], shown: string): (string | undefined)[] {
  let names: (string | undefined)[] = [];
  if (program === "read") {
    for (let i = 0; i < args.length; i++) {
      const value = args[i]!.value;
      if (value !== undefined && /^-[a-zA-Z]+$/.test(value)) {
        const last = value[value.length - 1]!;
        if ("adinNptu".includes(last)) {
          const option = args[++i]?.value;
          if (last === "a") names.push(option);
        }
        continue;
      }
      names.push(value);
    }
    if (names.length === 0) names = ["REPLY"];
  } else if (program === "mapfile" || program === "readarray") {
    if (args.some((arg) => arg.value === undefined || /^-[a-zA-Z]*C/.test(arg.value)))
      throw refusal(shown, `${program} -C runs a callback, which is not checked`);
    const operands = args.filter((arg, i) => !arg.value!.startsWith("-") && !/^-[a-zA-Z]*[dnOsuc]$/.test(args[i - 1]?.value ?? ""));
    names = operands.length > 0 ? operands.map((arg) => arg.value) : ["MAPFILE"];
  } else if (program === "printf") {
    const at = args.findIndex((arg) => arg.value === "-v");
    if (at >= 0) names = [args[at + 1]?.value];
  } else if (program === "getopts") {
    names = [args[1]?.value];
  } else if (
    (program === "compgen" || program === "complete") &&
    args.some((arg) => arg.value === undefined || /^-[a-zA-Z]*C/.test(arg.value))
  ) {
    throw refusal(shown, `${program} -C runs a command, which is not checked`);
  }
  return names;
}
