import { heartbeatPrompt } from "../agent/heartbeat-prompt.js";
import type { RunOutcome } from "../agent/outcome.js";
import type { Redactor } from "../audit/redact.js";
import type { Config } from "../config/schema.js";
import { answerIds } from "../delivery/dispatch.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import type { CountdEvents, EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { MemoryStore } from "../memory/store.js";
import type { FireRequest, RunContext } from "../runner/types.js";
import { HEARTBEAT_JOB, type RunRecord } from "../store/run-record.js";
import { checkInsOf, checkInsToChange, type StateStore } from "../store/state.js";
import { errorText } from "../text.js";
import { heartbeatRespondTool } from "../tools/heartbeat.js";
import {
  DEDUPE_WINDOW_MS,
  DELIVERED_KEPT_MS,
  decideHeartbeat,
  HOUR,
  idleMs,
  messageHash,
  readChecklist,
  silenceReason,
  withExchange,
} from "./heartbeat.js";

/** How long a check-in may take to be acknowledged before it does not count toward the daily cap. */
const DELIVERY_WAIT_MS = 60_000;
/** Memory entries shown to the heartbeat agent. */
const MEMORY_ENTRIES = 5;

type Execute = (job: Job, run: RunContext) => Promise<RunOutcome>;

export interface CheckInsOptions {
  /** The configuration in force: a reload changes the rules, the persona and the targets at once. */
  config: () => Config;
  state: StateStore;
  memory: () => MemoryStore;
  /** Where a check-in's acknowledgement is awaited: only a delivered check-in counts toward the cap and the dedupe. */
  outbox: () => Pick<DeliveryOutbox, "settled">;
  /** Where runs end (`run.finished`), and where each check-in's decision is told (the console's metrics count them). */
  events: EventBus;
  redactor: () => Redactor;
  /** The last exchange with the user outside the heartbeat (`countd ask`), if any. */
  lastExchange?: () => Promise<Date | undefined>;
  now?: () => Date;
  log?: Logger;
}

/** A run of `@heartbeat` this process executes, from its start until its check-in is settled. */
interface InFlight {
  /** The check-in the run's answer is, once the agent gave one worth sending. */
  hash?: string;
}

/** The heartbeat's prompt at `now`: its checklist, the last memories, and how long the user has been quiet, when known. */
export async function checkInPrompt(
  config: Config,
  memory: Pick<MemoryStore, "lastEntries">,
  now: Date,
  idle: number | undefined,
): Promise<string> {
  return heartbeatPrompt({
    now,
    timezone: config.heartbeat.timezone,
    idleHours: idle === undefined ? undefined : idle / HOUR,
    persona: config.persona,
    memories: await memory.lastEntries(MEMORY_ENTRIES),
    checklist: await readChecklist(config.heartbeat.checklist),
  });
}

/**
 * One check-in run: the heartbeat prompt and the reply tool, and the message the reply makes
 * (redacted), or why the agent stayed silent. A replay runs it with the prompt it recorded.
 */
export async function runCheckIn(
  execute: Execute,
  job: Job,
  run: RunContext,
  prompt: string,
  redactor: Redactor,
): Promise<{ outcome: RunOutcome; message: string; silence?: string }> {
  const respond = heartbeatRespondTool();
  const outcome = await execute(job, { ...run, request: { ...run.request, prompt, extraTools: [respond.tool] } });
  if (outcome.status !== "ok") return { outcome, message: "" };
  const silence = silenceReason(respond.result(), outcome.answer);
  if (silence !== undefined) return { outcome, message: "", silence };
  return { outcome, message: redactor.redact(respond.result()!.message.trim()) };
}

/**
 * What makes `@heartbeat` (jobs/heartbeat.ts) a heartbeat rather than a plain scheduled job:
 * - `admit`, before a scheduled fire: the rules of decideHeartbeat, without the LLM; a skip is
 *   logged and no run is made. Where daemons share a backend it is asked by the daemon that took the slot.
 * - `executor`, around its runs: the heartbeat prompt and reply tool; the run's answer is the
 *   check-in, or empty (nothing delivered) when the agent stays silent or repeats itself.
 * - after the run: once every target acknowledged the check-in (within a minute), it is recorded
 *   in the state, where the daily cap, the dedupe and the idle threshold read it.
 */
export class CheckIns {
  private readonly inFlight = new Map<string, InFlight>();
  private readonly now: () => Date;
  private readonly log: Logger;
  private readonly unsubscribe: () => void;

  constructor(private readonly opts: CheckInsOptions) {
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "heartbeat" });
    this.unsubscribe = opts.events.on("run.finished", ({ run }) => void this.finished(run));
  }

  /**
   * The fire to run, or undefined when the heartbeat's rules say the agent is not to be asked.
   * Other jobs' fires, and one asked for by hand, pass as they are.
   */
  async admit(request: FireRequest): Promise<FireRequest | undefined> {
    if (request.job !== HEARTBEAT_JOB || request.reason === "manual") return request;
    // A check-in still running or awaiting its acknowledgement: the state does not know yet what it said.
    if (this.inFlight.size > 0) {
      this.log.debug({ slot: request.scheduledAt.toISOString() }, "heartbeat tick passed: the previous check-in is not settled");
      return undefined;
    }
    const heartbeat = this.opts.config().heartbeat;
    const state = withExchange(checkInsOf(this.opts.state.data), await this.opts.lastExchange?.());
    const decision = decideHeartbeat({ now: this.now(), config: heartbeat, state, checklist: await readChecklist(heartbeat.checklist) });
    if (decision.run) return { ...request, reason: "heartbeat" };
    this.decided({ outcome: "skipped", reason: decision.skip });
    this.log.info({ reason: decision.reason }, "heartbeat skipped");
    return undefined;
  }

  /** Wraps the job executor: a run of `@heartbeat` gets the heartbeat prompt and reply tool, and answers with its check-in. */
  executor(execute: Execute): Execute {
    return async (job, run) => {
      if (job.name !== HEARTBEAT_JOB) return execute(job, run);
      const flight: InFlight = {};
      this.inFlight.set(run.id, flight);
      const checkIn = await runCheckIn(execute, job, run, await this.prompt(), this.opts.redactor());
      const { outcome, message } = checkIn;
      if (outcome.status !== "ok") return { ...outcome, answer: "" };
      if (checkIn.silence !== undefined) {
        this.decided({ outcome: "silent" });
        this.log.info({ reason: checkIn.silence }, "heartbeat silent");
        return { ...outcome, answer: "" };
      }
      const hash = messageHash(message);
      const now = this.now().getTime();
      const earlier = checkInsOf(this.opts.state.data).delivered.find((d) => d.hash === hash && now - Date.parse(d.at) < DEDUPE_WINDOW_MS);
      if (earlier) {
        this.decided({ outcome: "duplicate" });
        this.log.info({ deliveredAt: earlier.at }, "heartbeat suppressed: the same message was delivered before");
        return { ...outcome, answer: "" };
      }
      flight.hash = hash;
      return { ...outcome, answer: message };
    };
  }

  close(): void {
    this.unsubscribe();
  }

  private prompt(): Promise<string> {
    const now = this.now();
    return checkInPrompt(this.opts.config(), this.opts.memory(), now, idleMs(checkInsOf(this.opts.state.data), now));
  }

  /** A run of ours ended: a failed one is logged, a check-in awaited and, delivered, recorded. */
  private async finished(run: RunRecord): Promise<void> {
    const flight = run.job === HEARTBEAT_JOB ? this.inFlight.get(run.id) : undefined;
    if (!flight) return;
    try {
      if (run.status !== "ok") {
        this.decided({ outcome: "failed" });
        this.log.error({ runId: run.id, status: run.status, error: run.error ?? "" }, "heartbeat agent run failed");
      } else if (flight.hash !== undefined) {
        await this.delivered(run, flight.hash);
      }
    } finally {
      this.inFlight.delete(run.id);
    }
  }

  private async delivered(run: RunRecord, hash: string): Promise<void> {
    try {
      await this.acknowledged(answerIds({ name: HEARTBEAT_JOB, deliver: this.opts.config().heartbeat.deliver }, run));
    } catch (err) {
      // Not recorded: an undelivered check-in must not use up the daily cap or block its retry by the dedupe.
      this.decided({ outcome: "failed" });
      this.log.error({ runId: run.id, error: errorText(err) }, "heartbeat delivery failed");
      return;
    }
    const at = this.now();
    await this.opts.state.update((data) => {
      const hb = checkInsToChange(data);
      hb.delivered = hb.delivered.filter((d) => at.getTime() - Date.parse(d.at) < DELIVERED_KEPT_MS);
      hb.delivered.push({ at: at.toISOString(), hash });
      // A delivered check-in is contact with the recipient: the idle threshold counts from it.
      hb.lastContactAt = at.toISOString();
    });
    this.decided({ outcome: "sent" });
    this.log.info({ runId: run.id }, "heartbeat delivered");
  }

  /** Resolves once every delivery was acknowledged; rejects when one is dead, or still pending after a minute (the outbox keeps trying). */
  private async acknowledged(ids: string[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), DELIVERY_WAIT_MS)));
    try {
      const settled = await Promise.race([this.opts.outbox().settled(ids), late]);
      if (settled === "late") throw new Error("check-in not acknowledged within a minute; the outbox keeps trying");
      const dead = settled.find((s) => !s.delivered);
      if (dead && !dead.delivered) throw new Error(`check-in not delivered: ${dead.error}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private decided(decision: CountdEvents["heartbeat.decision"]): void {
    this.opts.events.emit("heartbeat.decision", decision);
  }
}
