import type { Config } from "../config/schema.js";
import { Outbox } from "../delivery/outbox.js";
import type { Logger } from "../log.js";
import { recordExchange } from "../store/last-exchange.js";
import { OutboxStore } from "../store/outbox-store.js";
import { readSpend } from "../store/spend-ledger.js";
import { StateStore } from "../store/state.js";
import { fileTranscripts } from "../store/transcripts.js";
import type { DaemonBackend } from "./types.js";
import { FileApprovals } from "../approvals/file-store.js";
import { approvalKey } from "../approvals/links.js";

/** A daemon alone: everything in its state directory, its schedule's fires run by its own runner. */
export function filesBackend(config: Config, log?: Logger): DaemonBackend {
  const dir = config.paths.state;
  return {
    sharedOutbox: false,
    keptOffline: "countd is not running: kept in state.json for its next start",
    openState: () => StateStore.open(dir, log ? { log } : {}),
    sessions: (local) => local,
    spend: (local) => local,
    spendSince: (since) => readSpend(dir, since),
    outbox: (send, _own, events) => Outbox.open({ stateDir: dir, send, ...(log ? { log } : {}), ...(events ? { events } : {}) }),
    readOutbox: async () => {
      const data = await OutboxStore.read(dir, new Date());
      return { entries: Object.values(data.entries), disabledTargets: data.disabledTargets };
    },
    transcripts: () => fileTranscripts(() => dir),
    recordExchange: (at) => recordExchange(dir, at),
    // One machine: the journal is where the run left it.
    continueJournal: async () => {},
    approvals: async () => ({ store: await FileApprovals.open(dir, log ? { log } : {}), key: await approvalKey(dir) }),
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
