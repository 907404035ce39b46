import type { ReplayReport } from "../rehearse/replay.js";
import type { RehearsalKind, RehearsalSummary } from "../rehearse/session.js";
import type { RunStatus } from "../store/run-record.js";

/*
 * What the rehearsal endpoints answer (src/console/rehearsal-api.ts), for the page's type check
 * as protocol.ts is for the rest of the API.
 */

export type { RehearsalKind, RehearsalSummary, ReplayReport };
export type { CapturedDelivery } from "../rehearse/capture.js";

/** POST /api/jobs/:name/rehearse and POST /api/runs/:id/replay: started, its id to follow. */
export interface RehearsalStarted {
  id: string;
}

/** One line of GET /api/rehearsals. */
export interface RehearsalItem {
  id: string;
  kind: RehearsalKind;
  job: string;
  /** The rehearsal's own run, once it has ended. */
  run?: string;
  status: RunStatus | "running" | "failed";
  started: string;
  /** The run a replay or a fork repeats. */
  of?: { job: string; run: string };
}

export interface RehearsalsView {
  rehearsals: RehearsalItem[];
}

/** GET /api/rehearsals/:id: while it runs, if it could not start, and once it has ended. */
export type RehearsalView =
  | { state: "running"; id: string; kind: RehearsalKind; job: string; started: string; of?: { job: string; run: string } }
  | { state: "failed"; id: string; kind: RehearsalKind; job: string; started: string; of?: { job: string; run: string }; error: string }
  | ({ state: "done"; replay?: ReplayReport } & RehearsalSummary);
