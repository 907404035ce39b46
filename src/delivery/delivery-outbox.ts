import type { OutboxEntry } from "../store/outbox-store.js";
import type { DeliveryMessage } from "./message.js";
import type { DeliveryTarget } from "./targets.js";

/** Sends one entry; resolves when the receiver acknowledged it, throws a DeliveryError otherwise. */
export type SendFn = (entry: Readonly<OutboxEntry>) => Promise<void>;

/** How a delivery ended: acknowledged, or dead with the reason. */
export type Settled = { id: string; delivered: true } | { id: string; delivered: false; error: string };

/** Answered at once by a daemon's own outbox (it is in memory), after a round trip by a shared one. */
type Answer<T> = T | Promise<T>;

/**
 * What the dispatcher, the console, the metrics and the commands ask of an outbox: the daemon's
 * own (Outbox, a journal in its state directory) or one several daemons share (a BullMQ queue in
 * Redis). Both keep the same promises: a delivery is stored before enqueue
 * resolves, retried on schedule.ts's schedule until acknowledged or given up, never sent again
 * once acknowledged, and carries its id (the webhook-id, the Message-ID) on every attempt.
 */
export interface DeliveryOutbox {
  /**
   * Queues `message` for each target; returns the delivery ids `<runKey>.<targetKey>`. One already known is not queued again.
   * `held`: why they are held (not attempted until `release`, given up at their 24 h like any other).
   */
  enqueue(
    runKey: string,
    targets: readonly DeliveryTarget[],
    message: DeliveryMessage,
    workspace: string,
    held?: string,
  ): Promise<string[]>;
  /** Attempts due deliveries from now on. */
  start(): void;
  /** Stops attempting and waits for the attempts in flight to be recorded. */
  stop(): Promise<void>;
  /** Stops, and lets go of what it holds (the journal, the connection). */
  close(): Promise<void>;
  /** For a one-off command: attempts what is due now (what this command queued, in a shared outbox) and resolves once none is in flight. */
  runDue(): Promise<void>;
  /** Resolves once every one of `ids` is delivered or dead; an id the outbox does not know counts as dead. */
  settled(ids: readonly string[]): Promise<Settled[]>;
  /** Pending and dead deliveries, oldest first. */
  list(): Answer<{ pending: Readonly<OutboxEntry>[]; dead: Readonly<OutboxEntry>[] }>;
  /** How many are pending and dead, without reading them. */
  counts(): Answer<{ pending: number; dead: number }>;
  /** When a delivery was acknowledged, if within DELIVERED_KEPT_MS. */
  deliveredAt(id: string): Answer<Date | undefined>;
  /** Acknowledged deliveries whose id starts with `prefix` (a run's `<job>.<run id>.`), with when. */
  /** `attempts`: how many it took, where the outbox kept it. */
  deliveredIds(prefix: string): Answer<Array<{ id: string; at: string; attempts?: number }>>;
  /** Makes one delivery (by id), or every dead one ("dead"), due now with a fresh 24 h; returns how many. */
  retry(which: string): Promise<number>;
  /** Sends a held delivery now, with a fresh 24 h; an id that is not held throws. */
  release(id: string): Promise<void>;
  /** Forgets dead deliveries; returns how many. */
  purge(): Promise<number>;
  /** Keys of targets that answered HTTP 410: nothing is sent to them until enabled again. */
  disabledTargets(): Answer<string[]>;
  /** Sends to every disabled target again (`why` is logged); returns their keys. */
  enableTargets(why: string): Promise<string[]>;
}
