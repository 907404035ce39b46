import { createHash } from "node:crypto";
import { canonical } from "../agent/breaker.js";
import type { RunOutcome } from "../agent/outcome.js";
import { selectPath } from "../jobs/json-path.js";
import type { Job } from "../jobs/types.js";
import type { LastDelivered, StateStore } from "../store/state.js";
import type { DeliveryOutbox } from "./delivery-outbox.js";

/*
 * `deliver_when: changed`: a run's answer is delivered only when it differs from the last answer
 * of the job that was queued for delivery. What is compared is decided here, in code, never by
 * the model: the answer's JSON (the typed output, or the answer when it parses), or the values
 * `changed_on` selects in it, or else the answer's words.
 */

/** Where each job's last delivered answer is kept between runs. */
export interface LastDeliveredStore {
  /** As saved now: where daemons share a backend, the job's last delivery may have been another daemon's. */
  get(job: string): Promise<LastDelivered | undefined>;
  set(job: string, last: LastDelivered): Promise<void>;
}

/** In the job state (state.json, or the shared backend's), so the comparison holds across restarts and daemons. */
export function stateLastDelivered(state: StateStore): LastDeliveredStore {
  return {
    get: async (job) => {
      // Redis away: the daemon's copy, rather than no comparison at all.
      await state.refresh().catch(() => {});
      return state.job(job).lastDelivered;
    },
    set: (job, last) => state.update((data) => void ((data.jobs[job] ??= {}).lastDelivered = last)),
  };
}

/** For a run that keeps nothing (a rehearsal): each one compares with what it saw itself. */
export function memoryLastDelivered(): LastDeliveredStore {
  const last = new Map<string, LastDelivered>();
  return { get: async (job) => last.get(job), set: async (job, value) => void last.set(job, value) };
}

/**
 * What a run's answer is compared by, as one string: with `changed_on`, the canonical JSON of each
 * value it selects, sorted, so a reordered list of the same values is the same; without, the
 * canonical JSON of the whole value (keys sorted, arrays in order). An answer that is not JSON is
 * compared by its words (normalisedText), `changed_on` or not.
 */
export function comparedText(job: Pick<Job, "changedOn">, outcome: Pick<RunOutcome, "answer" | "output">): string {
  const json = outcome.output !== undefined ? { value: outcome.output } : parsed(outcome.answer);
  if (json === undefined) return `text:${normalisedText(outcome.answer)}`;
  if (job.changedOn === undefined) return `json:${canonical(json.value)}`;
  return `set:${JSON.stringify(selectPath(json.value, job.changedOn).map(canonical).sort())}`;
}

export function comparedHash(job: Pick<Job, "changedOn">, outcome: Pick<RunOutcome, "answer" | "output">): string {
  return createHash("sha256").update(comparedText(job, outcome)).digest("hex");
}

/**
 * The same words in the same order: Unicode NFC, and every run of white space (line endings
 * included) one space, none at either end. A reflowed paragraph is not news.
 */
export function normalisedText(answer: string): string {
  return answer.normalize("NFC").replace(/\s+/gu, " ").trim();
}

/** A model often fences its JSON as Markdown code: the fence is not part of the answer. */
const FENCED = /^```(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/;

function parsed(answer: string): { value: unknown } | undefined {
  const text = answer.trim();
  try {
    return { value: JSON.parse(FENCED.exec(text)?.[1] ?? text) };
  } catch {
    return undefined;
  }
}

/**
 * The run an answer is unchanged since, or undefined when it is to be delivered. The last
 * delivered answer counts once it is queued; if every one of its deliveries went dead it never
 * arrived, and the same answer is delivered again.
 */
export async function unchangedSince(
  last: LastDelivered | undefined,
  hash: string,
  deliveries: { ids: readonly string[]; outbox: Pick<DeliveryOutbox, "list"> },
): Promise<string | undefined> {
  if (last?.hash !== hash) return undefined;
  const dead = new Set((await deliveries.outbox.list()).dead.map((entry) => entry.id));
  const lost = deliveries.ids.length > 0 && deliveries.ids.every((id) => dead.has(id));
  return lost ? undefined : last.run;
}
