import { join } from "node:path";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job, OverlapPolicy, WatchEvent } from "../../src/jobs/types.js";

/** A watch job on these globs, firing on adds and changes unless `events` says otherwise. */
export function watchJob(
  name: string,
  paths: string[],
  debounceMs: number,
  extra: { events?: WatchEvent[]; overlap?: OverlapPolicy } = {},
): Job {
  return {
    name,
    file: `/jobs/${name}.yaml`,
    timezone: "UTC",
    prompt: "Look at {{files}}",
    ...jobDefaults(),
    watch: { paths, events: extra.events ?? ["add", "change"], debounceMs },
    ...(extra.overlap ? { overlap: extra.overlap } : {}),
    timeoutMs: 60_000,
    catchUpMs: 0,
    retry: { attempts: 0, backoffMs: 0 },
  };
}

/**
 * A job that sees every file event under `dir`, with a longer debounce than the job under test:
 * once it has fired for a file, the job under test would have fired for it too, had it been going
 * to. Its runs overlap freely, so a runner never holds its fires back.
 */
export function probeJob(dir: string, debounceMs = 800, name = "probe"): Job {
  return watchJob(name, [join(dir, "**")], debounceMs, { events: ["add", "change", "unlink"], overlap: "allow" });
}
