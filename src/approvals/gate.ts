import type { ToolCall } from "../providers/types.js";
import { loadShellSyntax, type ShellSyntax } from "../tools/shell-syntax.js";
import { matchApproval } from "./match.js";
import type { ApproveSettings } from "./rules.js";

/** What the agent loop asks before each tool call: the reason it needs a person's yes, or undefined. */
export interface ApprovalGate {
  needs(call: ToolCall): Promise<string | undefined>;
}

/** The gate of an `approve:` block; the shell parser is loaded at the first exec call it is asked about. */
export function approvalGate(settings: ApproveSettings): ApprovalGate {
  let shell: Promise<ShellSyntax> | undefined;
  return {
    async needs(call) {
      const args = call.arguments ?? call.rawArguments;
      const syntax =
        settings.rules.some((rule) => rule.kind === "exec") && call.name === "exec" ? await (shell ??= loadShellSyntax()) : undefined;
      const match = matchApproval(settings.rules, { name: call.name, arguments: args }, syntax as ShellSyntax);
      return match?.why;
    },
  };
}
