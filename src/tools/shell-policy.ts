import { realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type * as Sh from "mvdan-sh";
import { isInside, ToolRefusal } from "./paths.js";
import { runnerFindings } from "./shell-runners.js";

type Node = Sh.Node;

/**
 * The parser takes ~200 ms to load, so the first check loads it rather than start-up. Everything
 * below that reads `syntax` runs inside a check, after `loadParser` has set it.
 */
let syntax: Sh.Syntax;
let parserLoaded: Promise<void> | undefined;

function loadParser(): Promise<void> {
  parserLoaded ??= import("mvdan-sh").then((sh) => {
    syntax = sh.default.syntax;
  });
  return parserLoaded;
}

export interface ShellPolicyConfig {
  /** Extra regular expressions, matched case-insensitively against the raw line and against each command. */
  denyPatterns: string[];
  /** Non-empty: allow-list mode, every command of the line must name one of these programs. */
  allowList: string[];
}

export interface CheckContext {
  /** Real path the command starts in. */
  cwd: string;
  /** Real path of the workspace. */
  workspace: string;
  /** Folders of the command's PATH: in allow-list mode a program named by path must live in one. */
  pathDirs: string[];
  /** With the workspace restriction: throws a ToolRefusal for a path the command must not touch. */
  checkPath?: (absolutePath: string) => Promise<unknown>;
}

/**
 * Checks a command line before it runs, on the tree of a real shell parser (mvdan-sh): every
 * command at every nesting level, the strings handed to `sh -c`/`eval`, the commands run by
 * wrappers such as `env`, `xargs` or `find -exec`. What cannot be known before the line runs
 * (a command name from a variable, text piped into a shell) is refused rather than guessed.
 * This is a guard rail for an unattended agent, not a sandbox: see `sandbox.ts` for that.
 */
export class ShellPolicy {
  private readonly patterns: RegExp[];
  private readonly allowed: Set<string> | undefined;

  constructor(config: ShellPolicyConfig) {
    this.patterns = config.denyPatterns.map((pattern) => {
      try {
        return new RegExp(pattern, "i");
      } catch (err) {
        throw new Error(`exec.denyPatterns: ${JSON.stringify(pattern)} is not a valid regular expression: ${(err as Error).message}`);
      }
    });
    this.allowed = config.allowList.length > 0 ? new Set(config.allowList) : undefined;
  }

  /** Resolves when `line` may run; throws a ToolRefusal naming the offending command or path otherwise. */
  async check(line: string, ctx: CheckContext): Promise<void> {
    this.matchPatterns(line, line);
    await loadParser();
    const scan = new Scan(this.allowed, ctx);
    scan.source(line, 0);
    scan.finish();
    for (const text of scan.commandTexts) this.matchPatterns(text, text);
    for (const use of scan.deleteRoots) await checkDeleteRoot(use, ctx);
    if (ctx.checkPath) for (const use of scan.paths) await checkPathWord(use, ctx, ctx.checkPath);
  }

  private matchPatterns(text: string, shown: string): void {
    const hit = this.patterns.find((pattern) => pattern.test(text));
    if (hit) throw refusal(shown, `matches the configured deny pattern /${hit.source}/`);
  }
}

function refusal(what: string, why: string): ToolRefusal {
  return new ToolRefusal(`refused: ${excerpt(what)} (${why})`);
}

function excerpt(text: string): string {
  const oneLine = text.replace(/\s*\n\s*/g, " ").trim();
  return oneLine.length > 120 ? `${oneLine.slice(0, 117)}...` : oneLine;
}

// Operator codes of the bundled parser (mvdan.cc/sh/v3 syntax/tokens.go); the policy tests
// exercise each of them, so a parser upgrade that shifts them fails there.
const RDR_IN = 56;
const RDR_IN_OUT = 57;
const DUP_IN = 58;
const DUP_OUT = 59;
const HEREDOC = 61;
const HEREDOC_DASH = 62;
const HERESTRING = 63;
const PARAM_TRANSFORM = 84; // ${x@P}: prompt expansion runs command substitutions found in the value
const TEST_VAR_SET = 110; // [[ -v name ]]
const TEST_NAMEREF = 111; // [[ -R name ]]
const ARITH_TEST_OPS = new Set([116, 117, 118, 119, 120, 121]); // -eq -ne -le -ge -lt -gt

/** set options that change nothing the check relies on; any other is refused. */
const SAFE_SET_LETTERS = "euxvfnC";
const SAFE_SET_OPTIONS = new Set(["errexit", "nounset", "xtrace", "verbose", "noglob", "noexec", "noclobber", "pipefail"]);

const BRACE_SEQUENCE = /^\{(-?\d+\.\.-?\d+|[A-Za-z]\.\.[A-Za-z])(\.\.-?\d+)?\}$/;

const MAX_DEPTH = 8;
const MAX_BRACE_WORDS = 256;

/** A word of a command after quote removal and brace expansion. */
interface Arg {
  /** Undefined when part of the word is decided at run time (a variable, `$(…)`, an extglob). */
  value: string | undefined;
  /** The literal text before the first part decided at run time (all of it when `value` is set). */
  prefix: string;
  /** Holds an unquoted `*`, `?` or `[`: the shell may turn it into other words. */
  pattern: boolean;
  /** The word as written. */
  shown: string;
}

interface Site {
  /** The whole simple command as written, for messages. */
  shown: string;
  redirs: Sh.Redirect[];
  src: Source;
}

interface PathUse {
  word: string;
  /** Only the literal start of the word is known. */
  partial: boolean;
  site: string;
}

class Source {
  private readonly bytes: Buffer;
  constructor(text: string) {
    this.bytes = Buffer.from(text);
  }
  /** The source text of `node`; the parser counts positions in UTF-8 bytes. */
  of(node: Node): string {
    return this.bytes.subarray(node.Pos().Offset(), node.End().Offset()).toString();
  }
}

const SHELLS = new Set(["sh", "bash", "rbash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh"]);

/** Programs that run the command given in their arguments, with the options that take a value. */
const WRAPPERS: Record<string, { valueOptions: string[]; operandsBefore?: number }> = {
  command: { valueOptions: [] },
  builtin: { valueOptions: [] },
  exec: { valueOptions: ["-a"] },
  nohup: { valueOptions: [] },
  setsid: { valueOptions: [] },
  time: { valueOptions: ["-f", "--format", "-o", "--output"] },
  nice: { valueOptions: ["-n", "--adjustment"] },
  ionice: { valueOptions: ["-c", "-n", "--class", "--classdata"] },
  stdbuf: { valueOptions: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  timeout: { valueOptions: ["-s", "--signal", "-k", "--kill-after"], operandsBefore: 1 },
  sudo: {
    valueOptions: ["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "--user", "--group", "--host", "--prompt", "--chdir", "--role", "--type"],
  },
  doas: { valueOptions: ["-u", "-C"] },
  env: { valueOptions: ["-u", "--unset", "-C", "--chdir"] },
  xargs: {
    valueOptions: ["-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"],
  },
  busybox: { valueOptions: [] },
  flock: { valueOptions: ["-w", "--timeout", "-E", "--conflict-exit-code"], operandsBefore: 1 },
  chroot: { valueOptions: ["--userspec", "--groups"], operandsBefore: 1 },
  taskset: { valueOptions: [], operandsBefore: 1 },
  chrt: { valueOptions: [], operandsBefore: 1 },
  unshare: { valueOptions: ["-S", "-G", "--setuid", "--setgid", "-R", "--root", "-w", "--wd"] },
  nsenter: { valueOptions: ["-t", "--target", "-S", "-G", "--setuid", "--setgid", "-r", "-w"] },
  prlimit: { valueOptions: ["-p", "--pid", "-o", "--output"] },
  runuser: { valueOptions: ["-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w", "--whitelist-environment"] },
  strace: { valueOptions: ["-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-X"] },
  ltrace: { valueOptions: ["-e", "-o", "-p", "-s", "-u", "-a", "-l", "-n", "-x", "-A", "-D", "-F"] },
  valgrind: { valueOptions: [] },
  fakeroot: { valueOptions: ["-l", "--lib", "--faked", "-s", "-i"] },
  firejail: { valueOptions: [] },
  catchsegv: { valueOptions: [] },
  torsocks: { valueOptions: ["-u", "-p", "-a", "-P"] },
  proxychains: { valueOptions: ["-f"] },
  proxychains4: { valueOptions: ["-f"] },
  chronic: { valueOptions: [] },
};

/** Variables that make a later command run other code than the one named. */
const CODE_VARIABLES = new Set(["PATH", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "IFS"]);

const DISK_DEVICE = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk)/;
/** Device files a command may name even under the workspace restriction. */
const HARMLESS_DEVICES = new Set(["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"]);

class Scan {
  readonly paths: PathUse[] = [];
  readonly deleteRoots: PathUse[] = [];
  /** Each simple command as plain words, for the configured patterns. */
  readonly commandTexts: string[] = [];
  /** Shell options changed by the line: refused once the line is scanned, so a worse finding is named first. */
  private readonly optionChanges: string[] = [];
  /** Variables the line sets from text known only at run time (read, mapfile, printf -v, x=$(…)). */
  private readonly runtimeWrites: string[] = [];
  /** Arithmetic that reads variables, which evaluates their values as expressions. */
  private readonly arithmeticReads: string[] = [];

  constructor(
    private readonly allowed: Set<string> | undefined,
    private readonly ctx: CheckContext,
  ) {}

  /** The refusals that wait for the whole line: option changes, and arithmetic on variables set at run time. */
  finish(): void {
    const [option] = this.optionChanges;
    if (option !== undefined) throw refusal(option, "changing shell options (shopt, set -o) is refused: they change how bash reads the line, which the check cannot follow");
    const [reads] = this.arithmeticReads;
    if (reads !== undefined && this.runtimeWrites.length > 0) {
      throw refusal(reads, `arithmetic on variables in a line that sets variables at run time (${excerpt(this.runtimeWrites[0]!)}) is refused: bash would run code found in their values`);
    }
  }

  /** Checks `text` as a command line; `asData`: text that is only code if bash evaluates it, so unparsable is fine. */
  source(text: string, depth: number, asData = false): void {
    if (depth > MAX_DEPTH) throw refusal(text, "commands nested too deeply to check");
    let file: Sh.File;
    try {
      file = syntax.NewParser().Parse(text, "command");
    } catch (err) {
      if (asData) return;
      throw refusal(text, `the shell parser cannot read it: ${parseError(err)}`);
    }
    const src = new Source(text);
    walk(file, (node) => this.visit(node, src, depth));
  }

  private visit(node: Node, src: Source, depth: number): void {
    switch (syntax.NodeType(node)) {
      case "Stmt":
        return this.statement(node as Sh.Stmt, src, depth);
      case "FuncDecl":
        return this.functionDecl(node as Sh.FuncDecl, src);
      case "Assign":
        return this.assignment(node as Sh.Assign, src, depth);
      case "DeclClause": {
        const decl = node as Sh.DeclClause;
        const name = decl.Variant.Value;
        this.requireAllowed(name, name);
        const flags = decl.Args.filter((arg) => arg.Naked && arg.Value).map((arg) => this.wordText(arg.Value, src));
        if (this.allowed && (name === "nameref" || flags.some((flag) => flag === undefined || /^-[a-zA-Z]*n/.test(flag)))) {
          throw refusal(src.of(node), `in allow-list mode, ${name} -n is refused: a name reference writes to another variable, such as PATH`);
        }
        // -i: every later assignment to the name is evaluated as arithmetic.
        if (flags.some((flag) => flag === undefined || /^[-+][a-zA-Z]*i/.test(flag))) {
          if (this.allowed) throw refusal(src.of(node), "in allow-list mode, integer variables (-i) are refused: bash evaluates what is assigned to them as arithmetic");
          this.arithmeticReads.push(src.of(node));
        }
        return;
      }
      case "UnaryTest": {
        const test = node as Sh.UnaryTest;
        if (this.allowed && (test.Op === TEST_VAR_SET || test.Op === TEST_NAMEREF)) {
          throw refusal(src.of(node), "in allow-list mode, [[ -v ]] and [[ -R ]] are refused: bash evaluates an array index in the name as code");
        }
        if (test.Op === TEST_VAR_SET || test.Op === TEST_NAMEREF) {
          const operand = src.of(test.X);
          if (/\$\(|`/.test(operand)) throw refusal(src.of(node), "[[ -v ]] on a name holding $( or a backquote is refused: bash evaluates its index as code");
          if (operand.includes("[")) this.arithmeticReads.push(src.of(node));
        }
        if (syntax.NodeType(test.X) === "Word") this.pathWords(this.expand(test.X as Sh.Word, src), src.of(node));
        return;
      }
      case "BinaryTest": {
        const test = node as Sh.BinaryTest;
        if (ARITH_TEST_OPS.has(test.Op)) this.arithmetic(node, src);
        return;
      }
      case "ArithmExp":
      case "ArithmCmd":
      case "LetClause":
      case "CStyleLoop":
        this.arithmetic(node, src);
        return;
      case "ParamExp": {
        const param = node as Sh.ParamExp;
        if (this.allowed) this.parameter(param, src);
        if (param.Index || param.Slice) this.arithmetic(node, src);
        return;
      }
      case "WordIter": {
        // `for x in $(cat f)`: x holds text known only at run time.
        const loop = node as unknown as { Name: Sh.Lit; Items: Sh.Word[] };
        if (loop.Items.some((item) => this.expand(item, src).some((arg) => arg.value === undefined || arg.pattern))) this.runtimeWrites.push(src.of(node));
        return;
      }
    }
  }

  private statement(stmt: Sh.Stmt, src: Source, depth: number): void {
    const site = stmt.Cmd ? src.of(stmt.Cmd) : src.of(stmt);
    for (const redirect of stmt.Redirs) this.redirect(redirect, site, src, depth);
    if (stmt.Cmd && syntax.NodeType(stmt.Cmd) === "CallExpr") {
      const call = stmt.Cmd as Sh.CallExpr;
      const argv = call.Args.flatMap((word) => this.expand(word, src));
      this.command(argv, { shown: site, redirs: stmt.Redirs, src }, depth);
    }
  }

  private redirect(redirect: Sh.Redirect, site: string, src: Source, depth: number): void {
    if ([HEREDOC, HEREDOC_DASH, HERESTRING].includes(redirect.Op)) {
      // The body is data for the command, but a command may evaluate it (read x <<< 'a[$(…)]'; $((x))).
      const text = redirect.Op === HERESTRING ? this.wordText(redirect.Word, src) : this.heredocText(redirect);
      if (text !== undefined) this.embeddedCode([literal(text)], `${site} ${src.of(redirect)}`, depth);
      return;
    }
    if (!redirect.Word) return;
    const targets = this.expand(redirect.Word, src);
    // `2>&1`, `<&0`, `>&-` name file descriptors, not files.
    if ((redirect.Op === DUP_IN || redirect.Op === DUP_OUT) && targets.every((t) => t.value !== undefined && /^(\d+-?|-)$/.test(t.value))) return;
    for (const target of targets) {
      if (target.value !== undefined && DISK_DEVICE.test(target.value)) throw refusal(`${site} ${src.of(redirect)}`, "redirection to a disk device is on the deny-list");
    }
    this.pathWords(targets, `${site} ${src.of(redirect)}`);
  }

  /** Checks one simple command (also one run by a wrapper, found by recursion). */
  private command(argv: Arg[], site: Site, depth: number): void {
    const [name, ...rest] = argv;
    if (!name) return;
    if (name.value === undefined) throw refusal(name.shown, "the command name is decided at run time, so it cannot be checked");
    if (name.pattern) throw refusal(name.shown, "the command name is a file-name pattern, so it cannot be checked");
    const program = basename(name.value);
    this.requireAllowed(program, name.value);
    if (this.allowed && name.value.includes("/") && !this.ctx.pathDirs.includes(dirname(resolve(this.ctx.cwd, name.value)))) {
      throw refusal(name.value, `in allow-list mode a program named by path must live in a PATH folder (${this.ctx.pathDirs.join(":")})`);
    }
    this.commandTexts.push(argv.map((arg) => arg.value ?? arg.shown).join(" "));
    this.denyList(program, rest, site);
    const handled = this.nestedCode(program, rest, site, depth);
    this.shellOptions(program, rest, site.shown);
    this.variableWrites(program, rest, site.shown);
    for (const finding of runnerFindings(program, rest, this.allowed !== undefined)) {
      if (finding.kind === "refuse") throw refusal(site.shown, finding.why);
      if (finding.kind === "code") this.source(finding.code, depth + 1);
      if (finding.kind === "command") this.command(finding.argv.map((arg) => literal(arg.value ?? "")), site, depth + 1);
      if (finding.kind === "path") this.pathWords([literal(finding.path)], site.shown);
    }
    const data = rest.filter((arg) => !handled.has(arg));
    this.embeddedCode(data, site.shown, depth);
    this.pathWords(data, site.shown);
  }

  /**
   * Checks what `program` runs in turn: the command after a wrapper, the code given to a shell,
   * eval, trap, su, alias or watch, the commands of find -exec. Returns the arguments so checked.
   */
  private nestedCode(program: string, args: Arg[], site: Site, depth: number): Set<Arg> {
    const handled = new Set<Arg>();
    const runInner = (inner: Arg[]) => {
      inner.forEach((arg) => handled.add(arg));
      this.command(inner, site, depth);
    };
    const runCode = (code: Arg | undefined, what: string) => {
      if (!code) throw refusal(site.shown, `${what} without its code in the line cannot be checked`);
      if (code.value === undefined) throw refusal(site.shown, `the code given to ${what} is decided at run time, so it cannot be checked`);
      handled.add(code);
      this.source(code.value, depth + 1);
    };

    const wrapper = WRAPPERS[program];
    if (wrapper) {
      let start = program === "env" ? envOptions(args, site.shown) : skipOptions(args, wrapper.valueOptions) + (wrapper.operandsBefore ?? 0);
      if (program === "flock") {
        const at = args.findIndex((arg) => arg.value === "-c" || arg.value === "--command");
        if (at >= 0) {
          runCode(args[at + 1], "flock -c");
          return handled;
        }
      }
      if (program === "env") {
        for (; start < args.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(args[start]?.value ?? ""); start++) {
          this.requireSafeVariable(args[start]!.value!.split("=")[0]!, site.shown);
        }
      }
      const inner = args.slice(start);
      if (inner.length > 0) runInner(inner);
      else if (program === "xargs") this.command([literal("echo")], site, depth);
      else if ((program === "sudo" || program === "doas") && args.some((arg) => /^-[a-zA-Z]*[si]|^--(shell|login)$/.test(arg.value ?? ""))) {
        this.scriptFromInput(program, site, depth);
      }
    } else if (SHELLS.has(program)) {
      this.shell(program, args, site, depth, runCode);
    } else if (program === "eval") {
      if (args.some((arg) => arg.value === undefined)) throw refusal(site.shown, "eval of text decided at run time cannot be checked");
      args.forEach((arg) => handled.add(arg));
      this.source(args.map((arg) => arg.value).join(" "), depth + 1);
    } else if (program === "trap") {
      if (args.length >= 2 && !args[0]!.value?.startsWith("-")) runCode(args[0], "trap");
    } else if (program === "source" || program === ".") {
      if (args[0] && args[0].value === undefined) throw refusal(site.shown, `${program} of a script decided at run time cannot be checked`);
    } else if (program === "su") {
      const at = args.findIndex((arg) => arg.value === "-c" || arg.value === "--command");
      if (at >= 0) runCode(args[at + 1], "su -c");
      else this.scriptFromInput("su", site, depth);
    } else if (program === "alias") {
      // With expand_aliases on, an alias's text runs as code.
      for (const arg of args) {
        if (arg.value === undefined) throw refusal(site.shown, "an alias decided at run time cannot be checked");
        const at = arg.value.indexOf("=");
        if (at > 0) runCode(literal(arg.value.slice(at + 1)), "alias");
        handled.add(arg);
      }
    } else if (program === "watch") {
      const start = skipOptions(args, ["-n", "--interval", "-q", "--equexit"]);
      const inner = args.slice(start);
      if (args.slice(0, start).some((arg) => arg.value === "-x" || arg.value === "--exec")) runInner(inner);
      else if (inner.length > 0) runCode(joined(inner), "watch");
    } else if (program === "find") {
      this.find(args, site, runInner);
    }
    return handled;
  }

  /** shopt and set -o/+o change how bash reads what follows (globskipdots, extglob, posix, keyword...). */
  private shellOptions(program: string, args: Arg[], shown: string): void {
    if (program === "shopt" && args.some((arg) => arg.value === undefined || /^-[a-z]*[su]/.test(arg.value))) this.optionChanges.push(shown);
    if (program !== "set") return;
    for (let i = 0; i < args.length; i++) {
      const value = args[i]!.value;
      if (value === undefined) return void this.optionChanges.push(shown);
      if (value === "--" || value === "-" || !/^[-+]/.test(value)) return;
      for (let k = 1; k < value.length; k++) {
        const letter = value[k]!;
        if (letter === "o") {
          const name = args[++i];
          if (name && !SAFE_SET_OPTIONS.has(name.value ?? "")) this.optionChanges.push(shown);
        } else if (!SAFE_SET_LETTERS.includes(letter)) this.optionChanges.push(shown);
      }
    }
  }

  /**
   * Builtins that write variables without an assignment word the parser shows: read, mapfile,
   * printf -v, getopts. Their values are known only at run time; in allow-list mode the names
   * they write must not be ones that change which code runs (PATH...).
   */
  private variableWrites(program: string, args: Arg[], shown: string): void {
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
      if (args.some((arg) => arg.value === undefined || /^-[a-zA-Z]*C/.test(arg.value))) throw refusal(shown, `${program} -C runs a callback, which is not checked`);
      const operands = args.filter((arg, i) => !arg.value!.startsWith("-") && !/^-[a-zA-Z]*[dnOsuc]$/.test(args[i - 1]?.value ?? ""));
      names = operands.length > 0 ? operands.map((arg) => arg.value) : ["MAPFILE"];
    } else if (program === "printf") {
      const at = args.findIndex((arg) => arg.value === "-v");
      if (at >= 0) names = [args[at + 1]?.value];
    } else if (program === "getopts") {
      names = [args[1]?.value];
    } else if ((program === "compgen" || program === "complete") && args.some((arg) => arg.value === undefined || /^-[a-zA-Z]*C/.test(arg.value))) {
      throw refusal(shown, `${program} -C runs a command, which is not checked`);
    }
    if (names.length === 0) return;
    this.runtimeWrites.push(shown);
    if (!this.allowed) return;
    for (const name of names) {
      if (name === undefined) throw refusal(shown, `in allow-list mode, ${program} into a variable named at run time is refused`);
      this.requireSafeVariable(name.replace(/\[.*$/s, ""), shown);
    }
  }

  private requireAllowed(program: string, shown: string): void {
    if (this.allowed && !this.allowed.has(program)) {
      throw refusal(shown, `not in the allow-list: ${[...this.allowed].join(", ")}`);
    }
  }

  private requireSafeVariable(name: string, shown: string): void {
    if (this.allowed && CODE_VARIABLES.has(name)) {
      throw refusal(shown, `in allow-list mode, setting ${name} is refused: it changes which code later commands run`);
    }
  }

  /** The original deny-list, applied to a command whatever wrapper or nesting it came in. */
  private denyList(program: string, args: Arg[], site: Site): void {
    const deny = (why: string) => refusal(site.shown, why);
    const values = args.map((arg) => arg.value);
    if (program === "rm") {
      const end = values.indexOf("--");
      const options = end >= 0 ? args.slice(0, end) : args;
      if (options.some((arg) => arg.value === undefined)) {
        throw deny("an argument of rm decided at run time could be -rf; put -- before it");
      }
      const recursive = options.some((arg) => /^-[^-]*[rR]/.test(arg.value!) || arg.value === "--recursive");
      const force = options.some((arg) => /^-[^-]*f/.test(arg.value!) || arg.value === "--force");
      if (recursive && force) throw deny("rm with -r and -f is on the deny-list");
    }
    if (program.startsWith("mkfs") || program === "mke2fs" || program === "format" || program === "diskpart") {
      throw deny(`${program} formats disks and is on the deny-list`);
    }
    if (program === "dd") {
      if (values.some((v) => v === undefined)) throw deny("an argument of dd decided at run time could be if=");
      if (values.some((v) => v!.startsWith("if="))) throw deny("dd if= is on the deny-list");
    }
    if (["shutdown", "reboot", "poweroff", "halt"].includes(program)) throw deny(`${program} is on the deny-list`);
    if (program === "systemctl" && values.some((v) => ["poweroff", "reboot", "halt", "kexec"].includes(v ?? ""))) {
      throw deny("systemctl poweroff/reboot/halt is on the deny-list");
    }
    if ((program === "init" || program === "telinit") && values.some((v) => v === undefined || v === "0" || v === "6")) {
      throw deny(`${program} 0/6 is on the deny-list`);
    }
    for (const value of values) {
      const target = value?.slice(value.indexOf("=") + 1);
      if (target !== undefined && DISK_DEVICE.test(target)) throw deny(`${value} names a disk device; writing to disks is on the deny-list`);
    }
  }

  /** A shell runs the string after -c, a script file, or what arrives on its input. */
  private shell(program: string, args: Arg[], site: Site, depth: number, runCode: (code: Arg | undefined, what: string) => void): void {
    let takesCode = false;
    let fromInput = false;
    let i = 0;
    for (; i < args.length; i++) {
      const value = args[i]!.value;
      if (value === undefined || !/^[-+]./.test(value)) break;
      if (value === "--") {
        i++;
        break;
      }
      if (value === "--rcfile" || value === "--init-file" || /^[-+][a-zA-Z]*[oO]$/.test(value)) {
        const option = args[++i]?.value;
        if (value.endsWith("O") || (value.endsWith("o") && !SAFE_SET_OPTIONS.has(option ?? ""))) this.optionChanges.push(site.shown);
        continue;
      }
      if (value.startsWith("--")) continue;
      if (value.startsWith("-") && value.includes("c")) takesCode = true;
      if (value.startsWith("-") && value.includes("s")) fromInput = true;
    }
    if (takesCode) return runCode(args[i], `${program} -c`);
    const script = args[i];
    if (script && script.value !== "-" && !fromInput) {
      if (script.value === undefined) throw refusal(site.shown, `${program} runs a script decided at run time (${script.shown}), which cannot be checked`);
      return;
    }
    this.scriptFromInput(program, site, depth);
  }

  private scriptFromInput(program: string, site: Site, depth: number): void {
    const input = site.redirs.filter((r) => [RDR_IN, RDR_IN_OUT, DUP_IN, HEREDOC, HEREDOC_DASH, HERESTRING].includes(r.Op)).pop();
    const cannot = (from: string) => refusal(site.shown, `${program} would run commands read from ${from}, which cannot be checked`);
    if (!input) throw cannot("a pipe or its input");
    if (input.Op === RDR_IN || input.Op === RDR_IN_OUT) {
      // A script file is run like `sh file`: allowed, its contents are not checked.
      if (input.Word && this.expand(input.Word, site.src).every((arg) => arg.value !== undefined)) return;
      throw cannot("a file decided at run time");
    }
    if (input.Op === DUP_IN) throw cannot("another file descriptor");
    const text = input.Op === HERESTRING ? this.wordText(input.Word, site.src) : this.heredocText(input);
    if (text === undefined) throw cannot("text decided at run time");
    this.source(text, depth + 1);
  }

  private wordText(word: Sh.Word | null, src: Source): string | undefined {
    if (!word) return "";
    const args = this.expand(word, src);
    return args.length === 1 ? args[0]!.value : undefined;
  }

  private heredocText(redirect: Sh.Redirect): string | undefined {
    if (!redirect.Hdoc) return "";
    const parts = redirect.Hdoc.Parts;
    if (!parts.every((part) => syntax.NodeType(part) === "Lit")) return undefined;
    const text = parts.map((part) => (part as Sh.Lit).Value).join("");
    const delimiterQuoted = redirect.Word?.Parts.some((part) => syntax.NodeType(part) !== "Lit" || /\\/.test((part as Sh.Lit).Value));
    return delimiterQuoted ? text : text.replace(/\\([$`\\\n])/g, (_, c: string) => (c === "\n" ? "" : c));
  }

  /** find runs commands after -exec/-ok and deletes with -delete. */
  private find(args: Arg[], site: Site, runInner: (inner: Arg[]) => void): void {
    let i = 0;
    while (i < args.length && /^-[HLP]$/.test(args[i]!.value ?? "")) i++;
    const roots: Arg[] = [];
    for (; i < args.length; i++) {
      const value = args[i]!.value;
      if (value !== undefined && (value.startsWith("-") || value === "(" || value === "!")) break;
      roots.push(args[i]!);
    }
    for (; i < args.length; i++) {
      const value = args[i]!.value;
      if (value === "-exec" || value === "-execdir" || value === "-ok" || value === "-okdir") {
        const end = args.findIndex((arg, j) => j > i && (arg.value === ";" || arg.value === "+"));
        const inner = args.slice(i + 1, end < 0 ? args.length : end);
        runInner(inner);
        i = end < 0 ? args.length : end;
      } else if (value === "-delete") {
        for (const root of roots.length > 0 ? roots : [literal(".")]) {
          if (root.value === undefined) throw refusal(site.shown, "find -delete on a folder decided at run time cannot be checked");
          this.deleteRoots.push({ word: root.value, partial: false, site: site.shown });
        }
      }
    }
  }

  private functionDecl(decl: Sh.FuncDecl, src: Source): void {
    const name = decl.Name.Value;
    walk(decl.Body, (node) => {
      if (syntax.NodeType(node) !== "CallExpr") return;
      const [first] = (node as Sh.CallExpr).Args;
      if (first && this.expand(first, src).some((arg) => arg.value === name)) {
        throw refusal(src.of(decl), `the function ${name} calls itself, the pattern of a fork bomb`);
      }
    });
  }

  private assignment(assign: Sh.Assign, src: Source, depth: number): void {
    if (assign.Naked || !assign.Name) return;
    this.requireSafeVariable(assign.Name.Value, src.of(assign));
    if (!assign.Value) return;
    const values = this.expand(assign.Value, src);
    if (values.some((value) => value.value === undefined)) this.runtimeWrites.push(src.of(assign));
    this.embeddedCode(values, src.of(assign), depth);
    this.pathWords(values, src.of(assign));
  }

  /**
   * Quoted text holding `$(…)` or backquotes is data until bash evaluates it, which it does in
   * arithmetic (`a[$(cmd)]` in a variable), PS4 and `${x@P}`. The deny-list checks such text as
   * code; allow-list mode refuses it outright.
   */
  private embeddedCode(args: Arg[], site: string, depth: number): void {
    for (const arg of args) {
      if (arg.value === undefined || !/\$\(|`/.test(arg.value)) continue;
      if (this.allowed) throw refusal(site, "in allow-list mode, text holding $( or a backquote is refused: bash can run it where it evaluates a variable");
      // Evaluated text expands like an unquoted here-document body, so it is parsed as one.
      this.source(`: <<COUNTD_EMBEDDED_TEXT\n${arg.value}\nCOUNTD_EMBEDDED_TEXT\n`, depth + 1, true);
    }
  }

  /**
   * Bash evaluates text in arithmetic as an expression, variables' values included, and
   * `a[$(cmd)]` found there runs cmd: quoted text holding `$(` or a backquote is refused always;
   * variables are refused in allow-list mode, and otherwise when the line sets some at run time.
   */
  private arithmetic(node: Node, src: Source): void {
    walk(node, (inner) => {
      const type = syntax.NodeType(inner);
      const text = type === "Lit" || type === "SglQuoted" ? (inner as Sh.Lit).Value : undefined;
      if (text !== undefined && /\$\(|`/.test(text)) {
        throw refusal(src.of(node), "arithmetic on text holding $( or a backquote is refused: bash would run it as a command");
      }
      const variable = type === "ParamExp" || (text !== undefined && /[A-Za-z_]/.test(text.replace(/\b0[xX][0-9a-fA-F]+\b|\b\d+#[0-9A-Za-z@_]+/g, "")));
      if (!variable) return;
      if (this.allowed) throw refusal(src.of(node), "in allow-list mode, arithmetic on variables is refused: bash can run code found in their values");
      this.arithmeticReads.push(src.of(node));
    });
  }

  private parameter(param: Sh.ParamExp, src: Source): void {
    if (param.Excl || param.Index || param.Slice || param.Exp?.Op === PARAM_TRANSFORM) {
      throw refusal(src.of(param), "in allow-list mode, indirect, indexed, sliced and @-transformed expansions are refused: bash can run code found in variables there");
    }
  }

  /** Records words that may name files, for the workspace check once the whole line is scanned. */
  private pathWords(args: Arg[], site: string): void {
    for (const arg of args) {
      // `.*` matches `..` in bash before 5.2 and with globskipdots off: a way out that no path shows.
      if (arg.pattern && arg.value !== undefined && arg.value.split("/").some((part) => part.startsWith(".") && /[*?[]/.test(part))) {
        throw refusal(site, `the file-name pattern ${JSON.stringify(arg.value)} can match "..", the parent folder, so it is refused`);
      }
      if (arg.value === undefined) {
        if (arg.prefix) this.paths.push({ word: arg.prefix, partial: true, site });
        continue;
      }
      this.paths.push({ word: arg.value, partial: false, site });
      // --target-directory=/etc, of=/dev/sda, -o/etc/x: the path after the option.
      const attached = /^[^=]+=(.+)$/.exec(arg.value)?.[1] ?? /^-[a-zA-Z](\/.*)$/.exec(arg.value)?.[1];
      if (attached !== undefined) this.paths.push({ word: attached, partial: false, site });
    }
  }

  /** The words `word` becomes: one per brace expansion, or one with an unknown value. */
  expand(word: Sh.Word, src: Source): Arg[] {
    const shown = src.of(word);
    const parts = word.Parts;
    for (const part of parts) {
      if (syntax.NodeType(part) !== "Lit") continue;
      for (const [group] of (part as Sh.Lit).Value.matchAll(/(?<!\\)\{[^{}]*\}/g)) {
        // The parser reads `{rm,-rf,../x}` as a broken sequence, bash as a list: a brace group with
        // `..` that is not a plain sequence is read differently, and may reach a parent folder.
        if (group.includes("..") && !BRACE_SEQUENCE.test(group)) throw refusal(shown, "brace expansion holding .. is refused: the parser and bash read it differently, and it can reach a parent folder");
      }
    }
    const split = syntax.SplitBraces(word).Parts;
    // SplitBraces rewrites the word in place, and Walk fails on the BraceExp nodes it adds.
    word.Parts = parts;
    const words = expandParts(split);
    if (!words || words.length > MAX_BRACE_WORDS) {
      return [{ value: undefined, prefix: literalPrefix(word.Parts), pattern: false, shown }];
    }
    return words.map(({ text, pattern }) => ({ value: text, prefix: text, pattern, shown }));
  }
}

interface Expansion {
  text: string;
  pattern: boolean;
}

/** Every word the parts expand to, or undefined when one part is decided at run time. */
function expandParts(parts: Node[]): Expansion[] | undefined {
  let words: Expansion[] = [{ text: "", pattern: false }];
  for (const part of parts) {
    const options = expandPart(part);
    if (!options) return undefined;
    words = words.flatMap((w) => options.map((o) => ({ text: w.text + o.text, pattern: w.pattern || o.pattern })));
    if (words.length > MAX_BRACE_WORDS) return undefined;
  }
  return words;
}

function expandPart(part: Node): Expansion[] | undefined {
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
      if (brace.Sequence) return braceSequence(brace.Elems);
      const all: Expansion[] = [];
      for (const elem of brace.Elems) {
        const words = expandParts(elem.Parts);
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
function braceSequence(elems: Sh.Word[]): Expansion[] | undefined {
  const [from, to, step] = elems.map((elem) => {
    const words = expandParts(elem.Parts);
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

function literalPrefix(parts: Node[]): string {
  let prefix = "";
  for (const part of parts) {
    const words = expandPart(part);
    if (!words || words.length !== 1) break;
    prefix += words[0]!.text;
  }
  return prefix;
}

const ANSI_ESCAPES: Record<string, string> = {
  a: "\x07", b: "\b", e: "\x1b", E: "\x1b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
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

function literal(text: string): Arg {
  return { value: text, prefix: text, pattern: false, shown: text };
}

function joined(args: Arg[]): Arg {
  const known = args.every((arg) => arg.value !== undefined);
  const text = args.map((arg) => arg.value ?? arg.shown).join(" ");
  return { value: known ? text : undefined, prefix: "", pattern: false, shown: text };
}

/** Index of the first operand after the options a program reads (and their values). */
function skipOptions(args: Arg[], valueOptions: string[]): number {
  let i = 0;
  for (; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined || value === "-" || !value.startsWith("-")) return i;
    if (value === "--") return i + 1;
    if (value.startsWith("--")) {
      // getopt_long takes any unambiguous prefix: `timeout --sig KILL 5 rm` is `--signal KILL`.
      if (!value.includes("=") && value.length > 3 && valueOptions.some((option) => option.startsWith("--") && option.startsWith(value))) i++;
      continue;
    }
    for (let k = 1; k < value.length; k++) {
      if (valueOptions.includes(`-${value[k]}`)) {
        if (k === value.length - 1) i++;
        break;
      }
    }
  }
  return i;
}

/**
 * Index of env's command: options read as GNU env reads them, clusters (`-iS'…'`) and long
 * prefixes (`--split`) included. -S and an option env does not have are refused.
 */
function envOptions(args: Arg[], shown: string): number {
  const longs = ["--ignore-environment", "--null", "--unset", "--chdir", "--split-string", "--block-signal", "--default-signal", "--ignore-signal", "--list-signal-handling", "--debug"];
  let i = 0;
  for (; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined) throw refusal(shown, "an option of env decided at run time could be -S, which splits a string into a command");
    if (value === "-") continue;
    if (value === "--") return i + 1;
    if (!value.startsWith("-")) return i;
    if (value.startsWith("--")) {
      const written = value.split("=")[0]!;
      const matches = longs.filter((name) => name.startsWith(written));
      if (matches.length !== 1) throw refusal(shown, `env ${written} is not an option env reads unambiguously, so what it runs cannot be checked`);
      if (matches[0] === "--split-string") throw refusal(shown, "env -S splits a string into a command, which is not checked");
      if ((matches[0] === "--unset" || matches[0] === "--chdir") && !value.includes("=")) i++;
      continue;
    }
    for (let k = 1; k < value.length; k++) {
      const letter = value[k]!;
      if (letter === "S") throw refusal(shown, "env -S splits a string into a command, which is not checked");
      if (letter === "u" || letter === "C") {
        if (k === value.length - 1) i++;
        break;
      }
      if (!"i0v".includes(letter)) throw refusal(shown, `env -${letter} is not an option env reads, so what it runs cannot be checked`);
    }
  }
  return i;
}

/** syntax.Walk, plus the `${x:offset:length}` parts the bundled version skips (they can hold `$(…)`). */
function walk(root: Node, visit: (node: Node) => void): void {
  syntax.Walk(root, (node) => {
    if (!node) return true;
    visit(node);
    if (syntax.NodeType(node) === "ParamExp") {
      const slice = (node as Sh.ParamExp).Slice;
      if (slice?.Offset) walk(slice.Offset, visit);
      if (slice?.Length) walk(slice.Length, visit);
    }
    return true;
  });
}

function parseError(err: unknown): string {
  // The parser throws Go error values: an object with an Error() method, not a JS Error.
  const goError = err as { Error?: () => string } | undefined;
  if (typeof goError?.Error === "function") return goError.Error();
  return err instanceof Error ? err.message : String(err);
}

/**
 * Whether `..` follows a name that could be a symbolic link: the kernel resolves `l/..` as the
 * parent of l's target, while a lexical check takes it as the folder holding l. A leading `..`,
 * `~/..` and `/..` follow folders that are real paths, so they can be checked.
 */
function dotDotAfterName(word: string): boolean {
  const parts = word.split("/");
  let named = false;
  for (const [index, part] of parts.entries()) {
    if (part === "..") {
      if (named) return true;
    } else if (part !== "" && part !== "." && !(index === 0 && part === "~")) named = true;
  }
  return false;
}

/** Where a word would lead: a `~` means the command's HOME, which is the workspace. */
function resolveWord(word: string, ctx: CheckContext): string[] | "other-home" {
  if (word === "~" || word.startsWith("~/")) return [join(ctx.workspace, word.slice(1))];
  if (word.startsWith("~")) return "other-home";
  if (isAbsolute(word)) return [word];
  // The line may `cd` anywhere in the workspace first, so a relative path is also taken from its top.
  return [...new Set([resolve(ctx.cwd, word), resolve(ctx.workspace, word)])];
}

async function checkPathWord(use: PathUse, ctx: CheckContext, checkPath: (path: string) => Promise<unknown>): Promise<void> {
  const { word } = use;
  if (HARMLESS_DEVICES.has(word) || /^\/dev\/fd\/\d+$/.test(word)) return;
  if (use.partial && !(isAbsolute(word) || word.startsWith("~") || word.includes(".."))) return;
  if (dotDotAfterName(word)) {
    throw refusal(use.site, `${JSON.stringify(word)} has .. after a folder name: if that name is a symbolic link (one the line creates too), .. leads elsewhere, so it is refused`);
  }
  const targets = resolveWord(word, ctx);
  if (targets === "other-home") throw refusal(use.site, `${JSON.stringify(word)} is another user's home folder, outside the workspace`);
  for (const target of targets) {
    try {
      await checkPath(target);
    } catch (err) {
      if (err instanceof ToolRefusal) throw refusal(use.site, err.message.replace(/^refused: /, ""));
      // A path the guard cannot resolve (name too long, loop of links) cannot be opened by the command either.
    }
  }
}

async function checkDeleteRoot(use: PathUse, ctx: CheckContext): Promise<void> {
  const targets = resolveWord(use.word, ctx);
  const escapes = targets === "other-home" || !(await Promise.all(targets.map(async (t) => isInside(await realpath(t).catch(() => t), ctx.workspace)))).every(Boolean);
  if (escapes) throw refusal(use.site, `find -delete on ${JSON.stringify(use.word)}, outside the workspace, is on the deny-list`);
}
