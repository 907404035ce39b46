/** How sed's scripts are read: the commands they run and the files they write or read. */
import { longOption, type Finding, type Word } from "./shell-args.js";

/**
 * sed runs the `e` command and the `s///e` flag as shell commands, and writes files with `w`,
 * `W` and `s///w`. The script is read as sed does; what cannot be read is refused.
 */
export function sedFindings<W extends Word>(args: W[]): Finding<W>[] {
  const scripts: string[] = [];
  let operands = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === undefined) return [{ kind: "refuse", why: "an argument of sed decided at run time could be a script that runs commands" }];
    if (operands || !arg.startsWith("-") || arg === "-") {
      if (
        scripts.length === 0 &&
        !args.slice(0, i).some((a) => /^(-e|--expression|-f|--file)/.test(a.value ?? "") || /^-[a-zA-Z]*[ef]/.test(a.value ?? ""))
      )
        scripts.push(arg);
      operands = true;
      continue;
    }
    if (arg === "--") {
      operands = true;
      continue;
    }
    const expression = longOption(arg, "--expression", 3);
    if (expression) {
      scripts.push(expression.value ?? args[++i]?.value ?? "");
      continue;
    }
    if (longOption(arg, "--file", 3)) return [{ kind: "refuse", why: "sed -f runs a script from a file, which is not checked" }];
    if (/^-[a-zA-Z]+/.test(arg) && !arg.startsWith("--")) {
      // Short options: -n -E -r -s -u -z take nothing; -i[SUFFIX] and -l N; -e SCRIPT; -f FILE.
      for (let k = 1; k < arg.length; k++) {
        const letter = arg[k]!;
        if (letter === "i") break;
        if (letter === "l") {
          if (k === arg.length - 1) i++;
          break;
        }
        if (letter === "f") return [{ kind: "refuse", why: "sed -f runs a script from a file, which is not checked" }];
        if (letter === "e") {
          scripts.push(k < arg.length - 1 ? arg.slice(k + 1) : (args[++i]?.value ?? ""));
          break;
        }
      }
    }
  }
  const out: Finding<W>[] = [];
  for (const script of scripts) {
    const parsed = readSedScript(script);
    if ("refuse" in parsed) return [{ kind: "refuse", why: parsed.refuse }];
    out.push(...parsed.files.map((path): Finding<W> => ({ kind: "path", path })));
  }
  return out;
}

/** Walks a sed script command by command: the files it writes or reads, or why it is refused. */
function readSedScript(script: string): { files: string[] } | { refuse: string } {
  const files: string[] = [];
  let i = 0;
  const at = () => script[i];
  const skipBlanks = () => {
    while (i < script.length && /[ \t]/.test(script[i]!)) i++;
  };
  const regex = (): boolean => {
    let delim = at();
    if (delim === "\\") delim = script[++i];
    if (delim === undefined || delim === "\n") return false;
    i++;
    while (i < script.length && script[i] !== delim) {
      if (script[i] === "\\") i++;
      else if (script[i] === "\n") return false;
      i++;
    }
    if (i >= script.length) return false;
    i++;
    return true;
  };
  const address = (): boolean => {
    if (/[0-9$]/.test(at() ?? "")) {
      while (/[0-9$~]/.test(at() ?? "")) i++;
    } else if (at() === "/" || at() === "\\") {
      if (!regex()) return false;
      while (/[IM]/.test(at() ?? "")) i++;
    }
    return true;
  };
  const restOfLine = (): string => {
    const end = script.indexOf("\n", i);
    const text = script.slice(i, end < 0 ? script.length : end);
    i = end < 0 ? script.length : end;
    return text;
  };
  while (i < script.length) {
    while (i < script.length && /[\s;]/.test(script[i]!)) i++;
    if (i >= script.length) break;
    if (at() === "#") {
      restOfLine();
      continue;
    }
    if (!address()) return { refuse: "the sed script cannot be read, so what it runs cannot be checked" };
    skipBlanks();
    if (at() === ",") {
      i++;
      skipBlanks();
      if (/[+~]/.test(at() ?? "")) i++;
      if (!address()) return { refuse: "the sed script cannot be read, so what it runs cannot be checked" };
      skipBlanks();
    }
    while (at() === "!") {
      i++;
      skipBlanks();
    }
    const command = at();
    i++;
    switch (command) {
      case "{":
      case "}":
      case "=":
      case "d":
      case "D":
      case "g":
      case "G":
      case "h":
      case "H":
      case "n":
      case "N":
      case "p":
      case "P":
      case "x":
      case "z":
      case "F":
        break;
      case "l":
      case "q":
      case "Q":
      case "L":
        skipBlanks();
        while (/[0-9]/.test(at() ?? "")) i++;
        break;
      case ":":
      case "b":
      case "t":
      case "T":
      case "v":
        // A label runs to the end of the line (or to a ';' for the branches, in GNU sed).
        while (i < script.length && script[i] !== "\n" && !(command !== ":" && script[i] === ";")) i++;
        break;
      case "a":
      case "i":
      case "c":
        // The text runs to an unescaped end of line.
        while (i < script.length && script[i] !== "\n") i += script[i] === "\\" ? 2 : 1;
        break;
      case "r":
      case "R":
      case "w":
      case "W": {
        skipBlanks();
        files.push(restOfLine());
        break;
      }
      case "e":
        return { refuse: "sed's e command runs a shell command, which is refused" };
      case "y":
        if (!sedPair(script, i, (end) => (i = end))) return { refuse: "the sed script cannot be read, so what it runs cannot be checked" };
        break;
      case "s": {
        if (!sedPair(script, i, (end) => (i = end))) return { refuse: "the sed script cannot be read, so what it runs cannot be checked" };
        while (i < script.length && /[gpiImM0-9e w]/.test(script[i]!) && script[i] !== "\n") {
          const flag = script[i]!;
          if (flag === "e") return { refuse: "sed's s///e flag runs the pattern space as a shell command, which is refused" };
          if (flag === "w") {
            i++;
            skipBlanks();
            files.push(restOfLine());
            break;
          }
          if (flag === " ") break;
          i++;
        }
        break;
      }
      default:
        return {
          refuse: `the sed script has a command ${JSON.stringify(command ?? "")} that cannot be read, so what it runs cannot be checked`,
        };
    }
  }
  return { files };
}

/** Reads the two parts of `s/a/b/` or `y/a/b/` starting at the delimiter; calls `done` with the index after them. */
function sedPair(script: string, start: number, done: (end: number) => void): boolean {
  const delim = script[start];
  if (delim === undefined || delim === "\n" || delim === "\\") return false;
  let i = start + 1;
  for (let part = 0; part < 2; part++) {
    while (i < script.length && script[i] !== delim) {
      if (script[i] === "\\") i++;
      i++;
    }
    if (i >= script.length) return false;
    i++;
  }
  done(i);
  return true;
}
