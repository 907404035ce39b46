import { realpath } from "node:fs/promises";
import { isAbsolute, join, resolve } from "node:path";
import { isInside } from "../inside.js";
import { ToolRefusal } from "./paths.js";
import { HARMLESS_DEVICES } from "./shell-rules.js";
import { refusal } from "./shell-refusal.js";
import { Scan, type PathUse } from "./shell-scan.js";
import { loadShellSyntax, type ShellSyntax } from "./shell-syntax.js";

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
  /** The parser, loaded at the first check and handed to every scan. */
  private syntax: Promise<ShellSyntax> | undefined;

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
    const scan = new Scan(await (this.syntax ??= loadShellSyntax()), this.allowed, ctx);
    scan.source(line, 0);
    scan.finish();
    for (const argv of scan.commands) {
      const text = argv.map((arg) => arg.value ?? arg.shown).join(" ");
      this.matchPatterns(text, text);
    }
    for (const use of scan.deleteRoots) await checkDeleteRoot(use, ctx);
    if (ctx.checkPath) for (const use of scan.paths) await checkPathWord(use, ctx, ctx.checkPath);
  }

  private matchPatterns(text: string, shown: string): void {
    const hit = this.patterns.find((pattern) => pattern.test(text));
    if (hit) throw refusal(shown, `matches the configured deny pattern /${hit.source}/`);
  }
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
    throw refusal(
      use.site,
      `${JSON.stringify(word)} has .. after a folder name: if that name is a symbolic link (one the line creates too), .. leads elsewhere, so it is refused`,
    );
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
  const escapes =
    targets === "other-home" ||
    !(await Promise.all(targets.map(async (t) => isInside(await realpath(t).catch(() => t), ctx.workspace)))).every(Boolean);
  if (escapes) throw refusal(use.site, `find -delete on ${JSON.stringify(use.word)}, outside the workspace, is on the deny-list`);
}
