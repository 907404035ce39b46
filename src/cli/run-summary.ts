import { describeTarget, targetKey, type DeliveryTarget } from "../delivery/targets.js";

/** What became of one of a run's deliveries by its first attempt: sent, to be retried, or given up. */
export interface DeliveryOutcome {
  /** The delivery's id, which `countd outbox release` takes for a held one. */
  id?: string;
  to: string;
  /** held: waiting for `countd outbox release` (on_verify_fail: hold). */
  state: "delivered" | "queued" | "held" | "failed";
  error?: string;
}

const STATES = ["delivered", "queued", "held", "failed"] as const;

/**
 * `countd run`'s closing lines on stderr, the same whether it ran here or in the daemon: the run's
 * id and status (so `countd show <id>` is one copy away; for a run that waits, the command that
 * answers its approval), then each delivery by its recipient.
 */
export function reportRun(
  run: { id: string; status: string; error?: string; approval?: string },
  deliveries: readonly DeliveryOutcome[],
): void {
  if (run.status === "waiting" && run.approval !== undefined)
    process.stderr.write(`countd: run ${run.id} waiting for approval ${run.approval}: countd approve ${run.approval}\n`);
  else process.stderr.write(`countd: run ${run.id} ${run.status}${run.error ? `: ${run.error}` : ""}\n`);
  const groups = STATES.map((state) => [state, deliveries.filter((d) => d.state === state)] as const)
    .filter(([, list]) => list.length > 0)
    .map(([state, list]) => `${state}: ${list.map((d) => (d.error ? `${d.to} (${d.error})` : d.to)).join(", ")}`);
  if (groups.length > 0) process.stderr.write(`countd: deliveries: ${groups.join(" · ")}\n`);
  if (deliveries.some((d) => d.state === "queued"))
    process.stderr.write("countd: some deliveries are pending; the daemon retries them (see countd outbox)\n");
  for (const held of deliveries.filter((d) => d.state === "held"))
    process.stderr.write(`countd: held until released: countd outbox release ${held.id}\n`);
}

/** Which of the job's targets a delivery id (`<job>.<run id>[.recovered].<key>`) is for; -1 for none. */
export function targetIndex(id: string, targets: readonly DeliveryTarget[]): number {
  return targets.findIndex((target) => id.endsWith(`.${targetKey(target)}`));
}

/** A delivered id names its target only by key: found among the job's targets. */
export function deliveredTo(id: string, targets: readonly DeliveryTarget[]): string {
  const found = targets[targetIndex(id, targets)];
  return found ? describeTarget(found) : id;
}
