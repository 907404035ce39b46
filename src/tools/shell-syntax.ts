import type * as Sh from "mvdan-sh";
import { errorText } from "../text.js";

/**
 * The loaded shell parser (mvdan-sh): the scan reads every line through it. Its published types
 * (@types/mvdan-sh) mark node fields nullable as Go pointers are; the parser fills those the scan
 * reads (a call's words, a statement's redirects, a loop's and a brace expansion's words, a
 * declaration's variant, a function's name and body), so the scan asserts them with `!`.
 */
export type ShellSyntax = Sh.ShellScript["syntax"];

/**
 * The parser takes ~200 ms to load, so the policy loads it at its first check rather than at
 * start-up, and hands it to each scan.
 */
export async function loadShellSyntax(): Promise<ShellSyntax> {
  const sh = await import("mvdan-sh");
  return sh.default.syntax;
}

// Operator codes of the bundled parser (mvdan.cc/sh/v3 syntax/tokens.go); the policy tests
// exercise each of them, so a parser upgrade that shifts them fails there. @types/mvdan-sh names
// them in const enums it does not export, and the bundled build has no such objects at run time.
export const RDR_IN = 56;
export const RDR_IN_OUT = 57;
export const DUP_IN = 58;
export const DUP_OUT = 59;
export const HEREDOC = 61;
export const HEREDOC_DASH = 62;
export const HERESTRING = 63;
export const PARAM_TRANSFORM = 84; // ${x@P}: prompt expansion runs command substitutions found in the value
export const TEST_VAR_SET = 110; // [[ -v name ]]
export const TEST_NAMEREF = 111; // [[ -R name ]]
export const ARITH_TEST_OPS = new Set([116, 117, 118, 119, 120, 121]); // -eq -ne -le -ge -lt -gt

export class Source {
  private readonly bytes: Buffer;
  constructor(text: string) {
    this.bytes = Buffer.from(text);
  }
  /** The source text of `node`; the parser counts positions in UTF-8 bytes. */
  of(node: Sh.Node): string {
    return this.bytes.subarray(node.Pos().Offset(), node.End().Offset()).toString();
  }
}

/** syntax.Walk, plus the `${x:offset:length}` parts the bundled version skips (they can hold `$(…)`). */
export function walk(syntax: ShellSyntax, root: Sh.Node, visit: (node: Sh.Node) => void): void {
  // Walk also calls the visitor with null after a node's children, which the published types leave out.
  syntax.Walk(root, (node: Sh.Node | null) => {
    if (!node) return true;
    visit(node);
    if (syntax.NodeType(node) === "ParamExp") {
      const slice = (node as Sh.ParamExp).Slice;
      if (slice?.Offset) walk(syntax, slice.Offset, visit);
      if (slice?.Length) walk(syntax, slice.Length, visit);
    }
    return true;
  });
}

export function parseError(err: unknown): string {
  // The parser throws Go error values: an object with an Error() method, not a JS Error.
  const goError = err as { Error?: () => string } | undefined;
  if (typeof goError?.Error === "function") return goError.Error();
  return errorText(err);
}
