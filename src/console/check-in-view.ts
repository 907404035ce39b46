import type { Config } from "../config/schema.js";
import type { Job } from "../jobs/types.js";
import { lastExchange } from "../store/last-exchange.js";
import { checkInsOf, type StateStore } from "../store/state.js";
import type { CronTrigger } from "../triggers/cron.js";
import { nextCheckIn } from "../triggers/heartbeat.js";

/**
 * The heartbeat's next fire as the console shows it: its next check-in, the first of its armed
 * ticks at which its rules let it ask the agent (which may still stay silent); none when no tick
 * of the coming week would.
 */
export async function nextCheckInShown(deps: { config: () => Config; state: StateStore; cron: CronTrigger }, job: Job): Promise<string[]> {
  const [firstTick] = job.enabled ? deps.cron.nextFires(job.name, 1) : [];
  if (!firstTick) return [];
  const config = deps.config();
  const exchange = await lastExchange(config.paths.state);
  const at = await nextCheckIn({
    config: config.heartbeat,
    state: checkInsOf(deps.state.data),
    firstTick,
    ...(exchange ? { lastExchange: exchange } : {}),
  });
  return at ? [at.toISOString()] : [];
}
