import type { JournalReading } from "./run-journal.js";
import type { RunRecord } from "./run-record.js";
import type { Transcript } from "./transcript.js";

/**
 * Where `countd show` and the console read a run's transcript: from the run's journal alone. A
 * daemon alone reads its state directory's journals (transcript.ts); where daemons share a
 * backend, a run of another node is read from the backend, where its node stored the journal.
 */
export interface TranscriptStore {
  read(run: RunRecord): Promise<Transcript>;
}

/**
 * The transcripts of this machine's runs, from the state directory as it is configured at each read.
 * The journal reader (and its entries' schemas) loads with the first read: commands that open the
 * backend only for the run history never read a journal.
 */
export function fileTranscripts(state: () => string, reading: JournalReading = {}): TranscriptStore {
  return { read: async (run) => (await import("./transcript.js")).readTranscript(state(), run, reading) };
}
