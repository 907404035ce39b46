import type { Logger } from "../log.js";
import { rehearsalId, type RehearsalKind } from "../rehearse/session.js";
import { errorText } from "../text.js";

/** A rehearsal, replay or fork the console started that has not written its summary: running, or failed to. */
export interface Flight {
  id: string;
  kind: RehearsalKind;
  job: string;
  started: string;
  of?: { job: string; run: string };
  /** Why it stopped before writing its summary. */
  error?: string;
}

/** Failed starts remembered: the console shows why, but a daemon that runs for months must not keep them all. */
const FAILURES_KEPT = 100;

/**
 * The rehearsals the console set going in the daemon's process. A rehearsal's folder holds no
 * summary until it ends, so while it runs (or if it failed before writing one) only this knows of
 * it. Shared by the console's two listeners (its address and the control socket).
 */
export class Rehearsals {
  private readonly flights = new Map<string, Flight>();

  constructor(
    readonly env: NodeJS.ProcessEnv,
    readonly log: Logger,
  ) {}

  /** Runs `work` in the background under a new id, answered at once. */
  start(what: Omit<Flight, "id" | "started" | "error">, work: (id: string) => Promise<unknown>): string {
    const id = rehearsalId();
    const flight: Flight = { id, ...what, started: new Date().toISOString() };
    this.flights.set(id, flight);
    work(id).then(
      () => this.flights.delete(id),
      (err: unknown) => {
        flight.error = errorText(err);
        this.log.warn({ rehearsal: id, job: flight.job, error: flight.error }, `the console's ${flight.kind} failed`);
        const failed = [...this.flights.values()].filter((f) => f.error !== undefined);
        for (const old of failed.slice(0, Math.max(0, failed.length - FAILURES_KEPT))) this.flights.delete(old.id);
      },
    );
    return id;
  }

  flight(id: string): Flight | undefined {
    return this.flights.get(id);
  }

  all(): Flight[] {
    return [...this.flights.values()];
  }
}
