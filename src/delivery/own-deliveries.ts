import type { Config } from "../config/schema.js";
import { targetKey, type DeliveryTarget } from "./targets.js";
import type { Job } from "../jobs/types.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import type { OutboxEntry } from "../store/outbox-shapes.js";

/**
 * What a daemon sharing its outbox with others sends is decided by its own job files, never by Redis: a delivery read from the
 * shared queue only names the job, the run and the target (by its key, the end of the delivery's
 * id), and the node sends to its own loaded target of that key, from its own workspace.
 */
export interface OwnDeliveries {
  /** The node's targets for `job` (its `deliver` and `on_failure`), undefined for a job it has not loaded. */
  targets(job: string): readonly DeliveryTarget[] | undefined;
  /** The node's configured workspace, the only place attachments are read from. */
  workspace(): string;
}

/** A node's own targets: its loaded jobs', and the heartbeat's from countd.yaml. */
export function ownDeliveries(job: (name: string) => Job | undefined, config: () => Config): OwnDeliveries {
  return {
    targets(name) {
      if (name === HEARTBEAT_JOB) return config().heartbeat.deliver;
      const loaded = job(name);
      return loaded && [...loaded.deliver, ...loaded.onFailure];
    },
    workspace: () => config().paths.workspace,
  };
}

/** A node that sends nothing from Redis (`countd outbox` listing): every delivery is refused. */
export const NO_DELIVERIES: OwnDeliveries = {
  targets: () => undefined,
  workspace: () => "",
};

/**
 * The entry this node sends for `entry` as read from Redis, with the node's own target and
 * workspace in place of the ones it carries; or why it is refused.
 */
export function ownEntry(entry: Readonly<OutboxEntry>, own: OwnDeliveries): { entry: OutboxEntry } | { refused: string } {
  const job = entry.message.job;
  const targets = own.targets(job);
  if (!targets) return { refused: `refused: job "${job}" is not a job this node loaded` };
  const prefix = `${job}.${entry.message.run.id}.`;
  if (!entry.id.startsWith(prefix)) return { refused: `refused: delivery id "${entry.id}" does not name job "${job}" and its run` };
  const target = targets.find((candidate) => entry.id.endsWith(`.${targetKey(candidate)}`));
  if (!target) return { refused: `refused: the delivery's target is not among job "${job}"'s targets on this node` };
  if (targetKey(entry.target) !== targetKey(target))
    return { refused: `refused: the delivery carries a target other than job "${job}"'s ${targetKey(target)}` };
  // The workspace in Redis is never read from. Nodes may keep theirs at different paths, which only
  // matters when files are attached: the run wrote them where its node said.
  const workspace = own.workspace();
  if (target.kind === "email" && target.attach.length > 0 && entry.workspace !== workspace)
    return { refused: `refused: workspace ${JSON.stringify(entry.workspace)} is not this node's, and the target attaches files` };
  return { entry: { ...entry, target, workspace } };
}
