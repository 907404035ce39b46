import { join, relative } from "node:path";
import type { ReplayReport } from "../rehearse/replay.js";
import { REHEARSALS_DIR } from "../rehearse/session.js";
import { usd } from "../text.js";

/**
 * `countd replay`'s report: for a replay the word `identical`, or the differences as unified
 * diffs; for a fork, the answer against the original's, the two tool-call sequences side by side,
 * and what each cost.
 */
export function formatReplay(report: ReplayReport, state: string): string {
  const folder = relative(process.cwd(), join(state, REHEARSALS_DIR, report.rehearsal)) || ".";
  const { of, tools } = report;
  const lines: string[] = [];
  if (report.kind === "replay") {
    lines.push(
      `Replay of run ${of.run} (${of.job}) from its journal: 0 LLM requests, ${count(tools.served, "recorded tool result")} served, ${count(tools.ran.length, "tool")} run.`,
    );
    lines.push(report.identical ? "identical" : "differs");
  } else {
    lines.push(
      `Fork of run ${of.run} (${of.job}): ${count(tools.served, "recorded tool result")} reused, ${count(tools.ran.length, "tool call")} run on the workspace copy.`,
    );
  }
  if (report.status.original !== report.status.replayed) lines.push(`status: ${report.status.original} → ${report.status.replayed}`);
  lines.push(report.answer.diff ? `answer:\n${report.answer.diff.trimEnd()}` : "answer: identical");
  // A fork's deliveries differ as its answer does: they are listed, their diffs kept in replay.json.
  for (const delivery of report.deliveries)
    lines.push(
      delivery.identical
        ? `delivery ${delivery.to}: identical`
        : report.kind === "fork"
          ? `delivery ${delivery.to}: rendered as ${delivery.files.join(", ")}`
          : `delivery ${delivery.to}:\n${(delivery.diff ?? "").trimEnd()}`,
    );
  for (const note of report.notes) lines.push(`note: ${note}`);
  if (report.kind === "fork") {
    lines.push("tool calls (original | fork):");
    const rows = Math.max(tools.original.length, tools.replayed.length);
    const call = (c: ReplayReport["tools"]["original"][number] | undefined) => (c ? `${c.name} ${JSON.stringify(c.arguments)}` : "-");
    const width = Math.min(60, Math.max(8, ...tools.original.map((c) => call(c).length)));
    for (let i = 0; i < rows; i++)
      lines.push(`  ${String(i + 1).padStart(2)}  ${call(tools.original[i]).slice(0, 60).padEnd(width)} | ${call(tools.replayed[i])}`);
    if (rows === 0) lines.push("  none | none");
    const { original, replayed } = report.spend;
    const spent = (s: typeof original) =>
      `${s.usage.inputTokens} in, ${s.usage.outputTokens} out, ${s.cost === null ? "unpriced" : usd(s.cost)}`;
    lines.push(`tokens and price: original ${spent(original)}; fork ${spent(replayed)}`);
  }
  lines.push(`rehearsal folder: ${folder} (countd show ${report.run} shows the ${report.kind}'s transcript)`);
  return `${lines.join("\n")}\n`;
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;
