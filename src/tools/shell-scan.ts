import { basename, dirname, resolve } from "node:path";
import type * as Sh from "mvdan-sh";
import { changesShellOptions, variablesWritten } from "./shell-builtins.js";
import { arithmeticReadsVariables, refuseEvaluatedExpansion } from "./shell-evaluation.js";
import { expandWord, joined, literal, misreadBraces, type Arg } from "./shell-expand.js";
import { refusal, shown } from "./shell-refusal.js";
import {
  CODE_VARIABLES,
  denyReason,
  DISK_DEVICE,
  envCommandStart,
  SAFE_SET_OPTIONS,
  SHELLS,
  skipOptions,
  WRAPPERS,
} from "./shell-rules.js";
import { runnerFindings } from "./shell-runners.js";
import {
  ARITH_TEST_OPS,
  DUP_IN,
  DUP_OUT,
  HEREDOC,
  HEREDOC_DASH,
  HERESTRING,
  parseError,
  RDR_IN,
  RDR_IN_OUT,
  Source,
  TEST_NAMEREF,
  TEST_VAR_SET,
  walk,
  type ShellSyntax,
} from "./shell-syntax.js";

type Node = Sh.Node;

const MAX_DEPTH = 8;

interface Site {
  /** The whole simple command as written, for messages. */
  shown: string;
  redirs: Sh.Redirect[];
  src: Source;
}

/** A word that may name a file, checked against the workspace once the whole line is scanned. */
export interface PathUse {
  word: string;
  /** Only the literal start of the word is known. */
  partial: boolean;
  site: string;
}

/**
 * One walk over a line's tree, with the loaded parser: refuses what it can tell at once, and
 * collects what waits for the whole line (paths, find -delete roots, option changes, arithmetic
 * on variables set at run time).
 */
export class Scan {
  readonly paths: PathUse[] = [];
  readonly deleteRoots: PathUse[] = [];
  /** Each simple command's words, wrappers' inner commands among them, for the deny patterns and approval rules. */
  readonly commands: Arg[][] = [];
  /** Shell options changed by the line: refused once the line is scanned, so a worse finding is named first. */
  private readonly optionChanges: string[] = [];
  /** Variables the line sets from text known only at run time (read, mapfile, printf -v, x=$(…)). */
  private readonly runtimeWrites: string[] = [];
  /** Arithmetic that reads variables, which evaluates their values as expressions. */
  private readonly arithmeticReads: string[] = [];

  constructor(
    private readonly syntax: ShellSyntax,
    private readonly allowed: Set<string> | undefined,
    /** Where the line starts and the folders of its PATH: allow-list mode places programs named by path. */
    private readonly ctx: { cwd: string; pathDirs: string[] },
  ) {}

  /** The refusals that wait for the whole line: option changes, and arithmetic on variables set at run time. */
  finish(): void {
    const [option] = this.optionChanges;
    if (option !== undefined)
      throw refusal(
        option,
        "changing shell options (shopt, set -o) is refused: they change how bash reads the line, which the check cannot follow",
      );
    const [reads] = this.arithmeticReads;
    if (reads !== undefined && this.runtimeWrites.length > 0) {
      throw refusal(
        reads,
        `arithmetic on variables in a line that sets variables at run time (${shown(this.runtimeWrites[0]!)}) is refused: bash would run code found in their values`,
      );
    }
  }

  /** Checks `text` as a command line; `asData`: text that is only code if bash evaluates it, so unparsable is fine. */
  source(text: string, depth: number, asData = false): void {
    if (depth > MAX_DEPTH) throw refusal(text, "commands nested too deeply to check");
    let file: Sh.File;
    try {
      file = this.syntax.NewParser().Parse(text, "command");
    } catch (err) {
      if (asData) return;
      throw refusal(text, `the shell parser cannot read it: ${parseError(err)}`);
    }
    const src = new Source(text);
    walk(this.syntax, file, (node) => this.visit(node, src, depth));
  }

  private visit(node: Node, src: Source, depth: number): void {
    switch (this.syntax.NodeType(node)) {
      case "Stmt":
        return this.statement(node as Sh.Stmt, src, depth);
      case "FuncDecl":
        return this.functionDecl(node as Sh.FuncDecl, src);
      case "Assign":
        return this.assignment(node as Sh.Assign, src, depth);
      case "DeclClause": {
        const decl = node as Sh.DeclClause;
        const name = decl.Variant!.Value;
        this.requireAllowed(name, name);
        const flags = decl.Args.filter((arg) => arg!.Naked && arg!.Value).map((arg) => this.wordText(arg!.Value, src));
        if (this.allowed && (name === "nameref" || flags.some((flag) => flag === undefined || /^-[a-zA-Z]*n/.test(flag)))) {
          throw refusal(
            src.of(node),
            `in allow-list mode, ${name} -n is refused: a name reference writes to another variable, such as PATH`,
          );
        }
        // -i: every later assignment to the name is evaluated as arithmetic.
        if (flags.some((flag) => flag === undefined || /^[-+][a-zA-Z]*i/.test(flag))) {
          if (this.allowed)
            throw refusal(
              src.of(node),
              "in allow-list mode, integer variables (-i) are refused: bash evaluates what is assigned to them as arithmetic",
            );
          this.arithmeticReads.push(src.of(node));
        }
        return;
      }
      case "UnaryTest": {
        const test = node as Sh.UnaryTest;
        if (this.allowed && (test.Op === TEST_VAR_SET || test.Op === TEST_NAMEREF)) {
          throw refusal(
            src.of(node),
            "in allow-list mode, [[ -v ]] and [[ -R ]] are refused: bash evaluates an array index in the name as code",
          );
        }
        if (test.Op === TEST_VAR_SET || test.Op === TEST_NAMEREF) {
          const operand = src.of(test.X);
          if (/\$\(|`/.test(operand))
            throw refusal(src.of(node), "[[ -v ]] on a name holding $( or a backquote is refused: bash evaluates its index as code");
          if (operand.includes("[")) this.arithmeticReads.push(src.of(node));
        }
        if (this.syntax.NodeType(test.X) === "Word") this.pathWords(this.expand(test.X as Sh.Word, src), src.of(node));
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
        if (this.allowed) refuseEvaluatedExpansion(param, src);
        if (param.Index || param.Slice) this.arithmetic(node, src);
        return;
      }
      case "WordIter": {
        // `for x in $(cat f)`: x holds text known only at run time.
        const loop = node as Sh.WordIter;
        if (loop.Items.some((item) => this.expand(item!, src).some((arg) => arg.value === undefined || arg.pattern)))
          this.runtimeWrites.push(src.of(node));
        return;
      }
    }
  }

  private statement(stmt: Sh.Stmt, src: Source, depth: number): void {
    const site = stmt.Cmd ? src.of(stmt.Cmd) : src.of(stmt);
    for (const redirect of stmt.Redirs) this.redirect(redirect!, site, src, depth);
    if (stmt.Cmd && this.syntax.NodeType(stmt.Cmd) === "CallExpr") {
      const call = stmt.Cmd as Sh.CallExpr;
      const argv = call.Args.flatMap((word) => this.expand(word!, src));
      this.command(argv, { shown: site, redirs: stmt.Redirs as Sh.Redirect[], src }, depth);
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
    if ((redirect.Op === DUP_IN || redirect.Op === DUP_OUT) && targets.every((t) => t.value !== undefined && /^(\d+-?|-)$/.test(t.value)))
      return;
    for (const target of targets) {
      if (target.value !== undefined && DISK_DEVICE.test(target.value))
        throw refusal(`${site} ${src.of(redirect)}`, "redirection to a disk device is on the deny-list");
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
    this.commands.push(argv);
    const denied = denyReason(program, rest);
    if (denied !== undefined) throw refusal(site.shown, denied);
    const handled = this.nestedCode(program, rest, site, depth);
    if (changesShellOptions(program, rest)) this.optionChanges.push(site.shown);
    this.variableWrites(program, rest, site.shown);
    for (const finding of runnerFindings(program, rest, this.allowed !== undefined)) {
      if (finding.kind === "refuse") throw refusal(site.shown, finding.why);
      if (finding.kind === "code") this.source(finding.code, depth + 1);
      if (finding.kind === "command")
        this.command(
          finding.argv.map((arg) => literal(arg.value ?? "")),
          site,
          depth + 1,
        );
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
      const envStart = program === "env" ? envCommandStart(args) : undefined;
      if (typeof envStart === "object") throw refusal(site.shown, envStart.refuse);
      let start = envStart ?? skipOptions(args, wrapper.valueOptions) + (wrapper.operandsBefore ?? 0);
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
      else if (
        (program === "sudo" || program === "doas") &&
        args.some((arg) => /^-[a-zA-Z]*[si]|^--(shell|login)$/.test(arg.value ?? ""))
      ) {
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

  /** Variables set at run time (read, mapfile...): in allow-list mode none that changes which code runs. */
  private variableWrites(program: string, args: Arg[], shown: string): void {
    const names = variablesWritten(program, args, shown);
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
      if (script.value === undefined)
        throw refusal(site.shown, `${program} runs a script decided at run time (${script.shown}), which cannot be checked`);
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
    if (!parts.every((part) => this.syntax.NodeType(part) === "Lit")) return undefined;
    const text = parts.map((part) => (part as Sh.Lit).Value).join("");
    const delimiterQuoted = redirect.Word?.Parts.some((part) => this.syntax.NodeType(part) !== "Lit" || /\\/.test((part as Sh.Lit).Value));
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
    const name = decl.Name!.Value;
    walk(this.syntax, decl.Body!, (node) => {
      if (this.syntax.NodeType(node) !== "CallExpr") return;
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
      if (this.allowed)
        throw refusal(site, "in allow-list mode, text holding $( or a backquote is refused: bash can run it where it evaluates a variable");
      // Evaluated text expands like an unquoted here-document body, so it is parsed as one.
      this.source(`: <<COUNTD_EMBEDDED_TEXT\n${arg.value}\nCOUNTD_EMBEDDED_TEXT\n`, depth + 1, true);
    }
  }

  private arithmetic(node: Node, src: Source): void {
    if (arithmeticReadsVariables(this.syntax, node, src, this.allowed !== undefined)) this.arithmeticReads.push(src.of(node));
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
    if (misreadBraces(this.syntax, word))
      throw refusal(
        src.of(word),
        "brace expansion holding .. is refused: the parser and bash read it differently, and it can reach a parent folder",
      );
    return expandWord(this.syntax, word, src);
  }
}
