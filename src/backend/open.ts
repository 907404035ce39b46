import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import { filesBackend } from "./files.js";
import type { StateStore } from "../store/state.js";
import type { Backend, DaemonBackend } from "./types.js";

/**
 * The one place that asks where countd keeps what lasts: countd.yaml's `cluster:` names a Redis
 * that several daemons share, otherwise the state directory's files. The shared backend's modules
 * (BullMQ, ioredis) are loaded only when it is chosen.
 */
export async function openBackend(config: Config, opts: { role: "daemon"; log?: Logger }): Promise<DaemonBackend>;
export async function openBackend(config: Config, opts: { role: "command"; log?: Logger }): Promise<Backend>;
export async function openBackend(config: Config, opts: { role: "daemon" | "command"; log?: Logger }): Promise<Backend>;
export async function openBackend(config: Config, opts: { role: "daemon" | "command"; log?: Logger }): Promise<Backend> {
  if (!config.cluster) return filesBackend(config, opts.log);
  const shared = await import("../cluster/backend.js");
  const open = opts.role === "daemon" ? shared.clusterDaemonBackend : shared.clusterCommandBackend;
  return open(config, config.cluster, opts.log);
}

/**
 * The state store a command opens beside (or instead of) the daemon: job state, pauses and every
 * daemon's run history. `close` waits for the saves, then closes the backend.
 */
export async function openState(
  config: Config,
  opts: { log?: Logger } = {},
): Promise<{ state: StateStore; backend: Backend; close(): Promise<void> }> {
  const backend = await openBackend(config, { role: "command", ...opts });
  try {
    const state = await backend.openState();
    return {
      state,
      backend,
      async close() {
        await state.close();
        await backend.close();
      },
    };
  } catch (err) {
    await backend.close();
    throw err;
  }
}

/** Runs `use` with the command's backend open, closing it after. */
export async function withBackend<T>(config: Config, use: (backend: Backend) => Promise<T>, log?: Logger): Promise<T> {
  const backend = await openBackend(config, { role: "command", ...(log ? { log } : {}) });
  try {
    return await use(backend);
  } finally {
    await backend.close();
  }
}
