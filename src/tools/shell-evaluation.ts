/**
 * Where bash evaluates text as code beyond what the parser shows as commands: arithmetic, which
 * evaluates variables' values as expressions, and expansions that reach other variables.
 */
import type * as Sh from "mvdan-sh";
import { refusal } from "./shell-refusal.js";
import { PARAM_TRANSFORM, walk, type ShellSyntax, type Source } from "./shell-syntax.js";

/**
 * Bash evaluates text in arithmetic as an expression, variables' values included, and
 * `a[$(cmd)]` found there runs cmd: quoted text holding `$(` or a backquote is refused always;
 * variables are refused in allow-list mode. Returns whether the arithmetic reads variables,
 * which the scan refuses once the line turns out to set some at run time.
 */
export function arithmeticReadsVariables(syntax: ShellSyntax, node: Sh.Node, src: Source, allowList: boolean): boolean {
  let reads = false;
  walk(syntax, node, (inner) => {
    const type = syntax.NodeType(inner);
    const text = type === "Lit" || type === "SglQuoted" ? (inner as Sh.Lit).Value : undefined;
    if (text !== undefined && /\$\(|`/.test(text)) {
      throw refusal(src.of(node), "arithmetic on text holding $( or a backquote is refused: bash would run it as a command");
    }
    const variable =
      type === "ParamExp" || (text !== undefined && /[A-Za-z_]/.test(text.replace(/\b0[xX][0-9a-fA-F]+\b|\b\d+#[0-9A-Za-z@_]+/g, "")));
    if (!variable) return;
    if (allowList)
      throw refusal(src.of(node), "in allow-list mode, arithmetic on variables is refused: bash can run code found in their values");
    reads = true;
  });
  return reads;
}

/** In allow-list mode: refuses the expansions through which bash can run code found in variables. */
export function refuseEvaluatedExpansion(param: Sh.ParamExp, src: Source): void {
  if (param.Excl || param.Index || param.Slice || param.Exp?.Op === PARAM_TRANSFORM) {
    throw refusal(
      src.of(param),
      "in allow-list mode, indirect, indexed, sliced and @-transformed expansions are refused: bash can run code found in variables there",
    );
  }
}
