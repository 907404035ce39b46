import { addUsage, emptyUsage, type Usage } from "../providers/types.js";
import { withBackend } from "../backend/open.js";
import type { SpendLine } from "../store/spend-ledger.js";
import { isEstimated, plural, usd } from "../text.js";
import { localClock } from "../time.js";
import type { CostGroup } from "./arguments.js";
import { EXIT, table } from "./output.js";
import { setting } from "./setting.js";
import { shownTime } from "../time.js";

/** What a group of LLM calls spent. */
export interface CostRow {
  /** The job, the model, or the day (YYYY-MM-DD in the budget's time zone). */
  key: string;
  calls: number;
  usage: Usage;
  /** USD of the priced calls; the unpriced ones are not in it (their USD is not known). */
  cost: number;
  unpricedCalls: number;
  /** Calls whose provider reported no usage: their tokens, and so their USD, are countd's estimate. */
  estimatedCalls: number;
}

/**
 * `countd cost`: what the LLM calls made since `sinceMs` ago spent, grouped by job, model or day,
 * with a total. It reads the backend's spend (every daemon's calls where several share one), so it works
 * whether the daemon runs or not.
 */
export async function cost(opts: { config?: string; sinceMs: number; by: CostGroup; json?: boolean }): Promise<number> {
  const { config } = await setting(opts.config);
  const timezone = config.budget.timezone;
  const since = new Date(Date.now() - opts.sinceMs);
  const lines = await withBackend(config, (backend) => backend.spendSince(since));
  const rows = group(lines, opts.by, timezone);
  const total = sum("total", lines);
  if (opts.json) {
    process.stdout.write(
      `${JSON.stringify({ since: since.toISOString(), by: opts.by, timezone, rows: rows.map(rounded), total: rounded(total) }, null, 2)}\n`,
    );
    return EXIT.ok;
  }
  const from = `since ${shownTime(since, timezone, false)}`;
  if (lines.length === 0) {
    process.stdout.write(`No LLM calls ${from}.\n`);
    return EXIT.ok;
  }
  // Cache writes are Anthropic's alone: their column is shown only when some call had them.
  const writes = total.usage.cacheWriteTokens > 0;
  const header = [opts.by.toUpperCase(), "CALLS", "INPUT", "CACHED", ...(writes ? ["CACHE WRITES"] : []), "OUTPUT", "USD"];
  const cells = (row: CostRow) => {
    const about = row.estimatedCalls > 0 ? "~" : "";
    return [
      row.key,
      String(row.calls),
      `${about}${row.usage.inputTokens}`,
      String(row.usage.cachedInputTokens),
      ...(writes ? [String(row.usage.cacheWriteTokens)] : []),
      `${about}${row.usage.outputTokens}`,
      usdText(row),
    ];
  };
  process.stdout.write(`LLM calls ${from}, by ${opts.by}${opts.by === "day" ? ` (${timezone})` : ""}\n`);
  process.stdout.write(table(header, [...rows.map(cells), cells(total)]));
  return EXIT.ok;
}

/**
 * Unpriced calls are named, never counted as $0: `$0.0123 + 2 unpriced calls`, or `2 unpriced
 * calls` alone; estimated calls are marked: `~$0.0123 (3 estimated)`.
 */
function usdText(row: CostRow): string {
  const unpriced = row.unpricedCalls > 0 ? plural(row.unpricedCalls, "unpriced call") : "";
  const estimated = row.estimatedCalls > 0 ? ` (${row.estimatedCalls} estimated)` : "";
  const priced = `${estimated ? "~" : ""}${usd(row.cost)}`;
  if (row.unpricedCalls === row.calls) return `${unpriced}${estimated}`;
  return `${unpriced ? `${priced} + ${unpriced}` : priced}${estimated}`;
}

/** Days in order; jobs and models by what they cost, the dearest first. */
function group(lines: readonly SpendLine[], by: CostGroup, timezone: string): CostRow[] {
  const keyOf = (line: SpendLine) =>
    by === "job"
      ? `${line.job}${line.mark ? ` (${line.mark})` : ""}`
      : by === "model"
        ? line.model
        : localClock(new Date(line.at), timezone).date;
  const groups = new Map<string, SpendLine[]>();
  for (const line of lines) {
    const key = keyOf(line);
    const members = groups.get(key);
    if (members) members.push(line);
    else groups.set(key, [line]);
  }
  const rows = [...groups].map(([key, members]) => sum(key, members));
  return by === "day"
    ? rows.sort((a, b) => a.key.localeCompare(b.key))
    : rows.sort((a, b) => b.cost - a.cost || b.calls - a.calls || a.key.localeCompare(b.key));
}

function sum(key: string, lines: readonly SpendLine[]): CostRow {
  const row: CostRow = { key, calls: 0, usage: emptyUsage(), cost: 0, unpricedCalls: 0, estimatedCalls: 0 };
  for (const line of lines) {
    row.calls++;
    if (isEstimated(line.usage)) row.estimatedCalls++;
    addUsage(row.usage, line.usage);
    if (line.cost === null) row.unpricedCalls++;
    else row.cost += line.cost;
  }
  return row;
}

/** Sums of many calls' prices carry float noise (0.30000000000000004): a billionth of a dollar is finer than any price. */
const rounded = (row: CostRow): CostRow => ({ ...row, cost: Math.round(row.cost * 1e9) / 1e9 });
