import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import { recordExchange } from "../store/last-exchange.js";
import { StateStore } from "../store/state.js";
import { fileTranscripts } from "../store/transcripts.js";
import type { DaemonBackend } from "./types.js";

/**
 * A daemon alone: everything in its state directory, its schedule's fires run by its own runner.
 * The outbox, the spend ledger and the approvals are loaded when asked for: commands that read
 * the run history (countd jobs, history) use none of them.
 */
export function filesBackend(config: Config, log?: Logger): DaemonBackend {
  const dir = config.paths.state;
  return {
    sharedOutbox: false,
    keptOffline: "countd is not running: kept in state.json for its next start",
    openState: () => StateStore.open(dir, log ? { log } : {}),
    sessions: (local) => local,
    spend: (local) => local,
    spendSince: async (since) => (await import("../store/spend-ledger.js")).readSpend(dir, since),
    outbox: async (send, _own, events) => {
      const { Outbox } = await import("../delivery/outbox.js");
      return Outbox.open({ stateDir: dir, send, ...(log ? { log } : {}), ...(events ? { events } : {}) });
    },
    readOutbox: async () => {
      const { OutboxStore } = await import("../store/outbox-store.js");
      const data = await OutboxStore.read(dir, new Date());
      return { entries: Object.values(data.entries), disabledTargets: data.disabledTargets };
    },
    transcripts: () => fileTranscripts(() => dir),
    recordExchange: (at) => recordExchange(dir, at),
    // One machine: the journal is where the run left it.
    continueJournal: async () => {},
    approvals: async () => {
      const [{ FileApprovals }, { approvalKey }] = await Promise.all([
        import("../approvals/file-store.js"),
        import("../approvals/links.js"),
      ]);
      return { store: await FileApprovals.open(dir, log ? { log } : {}), key: await approvalKey(dir) };
    },
    scheduled: (here) => here,
    // The daemon's own reads move its journals' misfit lines to the quarantine file.
    view: async ({ state, runner }) => ({
      transcripts: fileTranscripts(state, { ...(log ? { log } : {}), moveAside: true }),
      cancel: async (run, why) => runner.cancel(run.id, why),
    }),
    serve: () => {},
    retain: () => {},
    stop: (shutdown) => shutdown(),
    close: async () => {},
  };
}
