import type { RunRecord } from "./run-record.js";
import { readTranscript, type Transcript } from "./transcript.js";

/**
 * Where `countd show` and the console read a run's transcript. A daemon alone puts it together
 * from its session files and audit log (transcript.ts); in a cluster a run of another node is read
 * from Redis, where its node stored it (cluster/transcripts.ts).
 */
export interface TranscriptStore {
  read(run: RunRecord): Promise<Transcript>;
}

/** The transcripts of this machine's runs, from the folders as they are configured at each read. */
export function fileTranscripts(paths: () => { state: string; logs: string }): TranscriptStore {
  return { read: (run) => readTranscript(paths(), run) };
}
