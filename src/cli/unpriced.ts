import { providerForPreset } from "../config/load.js";
import type { Config, ProviderConfig } from "../config/schema.js";
import { Pricer } from "../cost/prices.js";
import { displayPath } from "../jobs/load.js";
import type { Job } from "../jobs/types.js";
import type { PresetName } from "../providers/presets.js";

/** A model some run uses, and the file that chose it. */
interface ModelUse {
  file: string;
  provider?: string;
  model?: string;
}

/**
 * `countd validate`'s warning for each model a job (or the enabled heartbeat) runs on that has no
 * price: its runs are recorded with cost null and escape the USD budgets. Once per model, named
 * at the first file that chose it: countd.yaml when the job keeps its provider and model.
 */
export function unpricedModelWarnings(config: Config, jobs: readonly Job[], env: NodeJS.ProcessEnv): string[] {
  const configFile = config.file ? displayPath(config.file) : "countd.yaml";
  const uses: ModelUse[] = jobs.map((job) => {
    const { provider, model } = job.overrides;
    return { file: provider !== undefined || model !== undefined ? displayPath(job.file) : configFile, provider, model };
  });
  if (config.heartbeat.enabled) uses.push({ file: configFile, provider: config.heartbeat.provider, model: config.heartbeat.model });
  const pricer = new Pricer(config.prices);
  const warned = new Set<string>();
  const warnings: string[] = [];
  for (const use of uses) {
    const endpoint = endpointOf(use.provider, config, env);
    // A provider the job cannot reach (its URL or key variable unset) fails the run itself, which says why.
    if (!endpoint) continue;
    const model = use.model ?? endpoint.model;
    const key = `${endpoint.preset}\0${model}`;
    if (warned.has(key)) continue;
    warned.add(key);
    const ref = { preset: endpoint.preset, model, ...(endpoint.baseURL !== undefined ? { baseURL: endpoint.baseURL } : {}) };
    if (pricer.priced(ref)) continue;
    warnings.push(
      `${use.file}: warning: model "${model}" (provider ${endpoint.preset}) has no price: its runs are recorded with cost null; add it under prices: to count it against budgets in USD`,
    );
  }
  return warnings;
}

/** The provider a run would use, as the runtime resolves it (runtime.ts). */
function endpointOf(preset: string | undefined, config: Config, env: NodeJS.ProcessEnv): ProviderConfig | undefined {
  if (preset === undefined || preset === config.provider.preset) return config.provider;
  try {
    // The job file's schema admits preset names only.
    return providerForPreset(preset as PresetName, config.provider, env);
  } catch {
    return undefined;
  }
}
