import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { silentLogger, type Logger } from "../log.js";
import type { ChatMessage } from "../providers/types.js";
import { jobOfSession, sharedSessionId } from "../runner/session-ids.js";
import { chatMessageShape } from "../sessions/message-shape.js";
import type { RunMarker, SessionHistory, SessionStore } from "../sessions/store.js";
import { appendJsonLines } from "../store/jsonl.js";
import { KeyedQueue } from "../store/keyed-queue.js";
import { errorText } from "../text.js";
import { within } from "./settle.js";

/** A shared session's entries, oldest first: each run's marker, then its messages, as in a session file. */
const listKey = (sessionId: string) => `countd:session:${sessionId}`;
/** Set once a block is in the list: a block sent again after a lost reply is not added twice. */
const blockKey = (block: string) => `countd:session-block:${block}`;
/** Longer than any outage a daemon rides out holding an unsent block in memory. */
const BLOCK_KEPT_MS = 86_400_000;
/**
 * How long a run waits for a Redis that accepts connections but does not answer: at its start for
 * the history and to drop what was summarised (then it fails), at its end for its messages to be
 * added (then they are sent behind).
 */
export const SESSION_WAIT_MS = 5_000;

/**
 * Appends one block (a run's marker and messages) unless it is there already.
 * KEYS: list, block; ARGV: how long the block's id is kept (ms), then the entries.
 */
const APPEND = `
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[1], unpack(ARGV, 2))
return 1
`;

/**
 * Drops the oldest ARGV[1] messages and the run markers among them, in one step: a block another
 * daemon appends meanwhile lands after them. KEYS: list.
 */
const DROP = `
local wanted = tonumber(ARGV[1])
local dropped = 0
while dropped < wanted do
  local entry = redis.call('LPOP', KEYS[1])
  if not entry then break end
  local ok, value = pcall(cjson.decode, entry)
  if ok and type(value) == 'table' and value['role'] ~= nil then dropped = dropped + 1 end
end
return dropped
`;

interface Block {
  id: string;
  entries: string[];
  messages: ChatMessage[];
}

/** The session of a `session: shared` job: `cron:<job>`, never an isolated run's `cron:<job>:<run>`. */
function isShared(sessionId: string): boolean {
  const job = jobOfSession(sessionId);
  return job !== undefined && sharedSessionId(job) === sessionId;
}

/**
 * A cluster's sessions: a `session: shared` job's history lives in Redis, one list per job, so a
 * run on any node continues the conversation its runs on other nodes had. Every other session (an
 * isolated run's, `countd ask`'s, a subagent's) is one process's and stays in the state
 * directory's files. A shared session is bounded as a file is: each run first summarises what is
 * past agent.max_history into MEMORY.md and drops it (overflow.ts), here in one Lua step.
 *
 * Each run's messages are appended as one block (RPUSH of its marker and messages, atomic), so
 * runs that overlap (`overlap: allow`) never overwrite each other: the list is append-only, each
 * block lands whole in the order the runs ended, and a run sees the history as it was when it began.
 * The node's own file gets the block too (never read back: it holds this node's runs alone), so the
 * run's transcript reads there as on a daemon alone.
 *
 * While Redis is away a block is kept in memory and sent, in order and at most once, when Redis is
 * back (or at this session's next use); a run that starts meanwhile fails at loading its history
 * rather than going on without it.
 */
export class ClusterSessions implements SessionHistory {
  private readonly unsent = new Map<string, Block[]>();
  private readonly queue = new KeyedQueue();
  /** Appends to this node's copies, one at a time per file. */
  private readonly copies = new KeyedQueue();
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    private readonly local: SessionStore,
    opts: { log?: Logger } = {},
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "sessions" });
    redis.on("ready", () => {
      for (const sessionId of this.unsent.keys()) void this.queue.run(sessionId, () => this.send(sessionId));
    });
  }

  load(sessionId: string): Promise<ChatMessage[]> {
    if (!isShared(sessionId)) return this.local.load(sessionId);
    const loaded = this.queue.run(sessionId, async () => {
      await this.send(sessionId);
      let entries: string[];
      try {
        entries = await this.redis.lrange(listKey(sessionId), 0, -1);
      } catch (err) {
        throw new Error(`cannot read the shared session ${sessionId} from Redis: ${errorText(err)}`, { cause: err });
      }
      const unsent = (this.unsent.get(sessionId) ?? []).flatMap((block) => block.messages);
      return [...this.parse(sessionId, entries), ...unsent];
    });
    return within(loaded, SESSION_WAIT_MS, () => {
      throw new Error(`cannot read the shared session ${sessionId} from Redis: no answer within ${SESSION_WAIT_MS} ms`);
    });
  }

  /** An isolated run's file is created ahead on this node, as a daemon alone creates it; a shared session's history is Redis's. */
  expect(sessionId: string): void {
    if (!isShared(sessionId)) this.local.expect(sessionId);
  }

  dismiss(sessionId: string): Promise<void> {
    return isShared(sessionId) ? Promise.resolve() : this.local.dismiss(sessionId);
  }

  async append(sessionId: string, messages: ChatMessage[], runId?: string): Promise<void> {
    if (!isShared(sessionId)) return this.local.append(sessionId, messages, runId);
    if (messages.length === 0) return;
    const marker: RunMarker[] = runId === undefined ? [] : [{ run: runId, at: new Date().toISOString() }];
    const block: Block = { id: randomUUID(), entries: [...marker, ...messages].map((entry) => JSON.stringify(entry)), messages };
    const sent = this.queue.run(sessionId, async () => {
      const unsent = this.unsent.get(sessionId);
      if (unsent) unsent.push(block);
      else this.unsent.set(sessionId, [block]);
      await this.send(sessionId);
    });
    await within(sent, SESSION_WAIT_MS, () =>
      this.log.warn({ sessionId }, "Redis does not answer; the run's messages are added to the shared session when it does"),
    );
    // Written, never read back here: the history is Redis's, and this node's copy only grows.
    const file = this.local.fileOf(sessionId);
    await this.copies.run(file, () => appendJsonLines(file, [...marker, ...messages]));
  }

  dropOldest(sessionId: string, count: number): Promise<void> {
    if (!isShared(sessionId)) return this.local.dropOldest(sessionId, count);
    const dropped = this.queue.run(sessionId, async () => {
      await this.send(sessionId);
      if (this.unsent.has(sessionId)) throw new Error(`the shared session ${sessionId} has messages not yet in Redis; nothing dropped`);
      const n = Math.max(0, Math.floor(count));
      if (n > 0) await this.redis.eval(DROP, 1, listKey(sessionId), n);
    });
    return within(dropped, SESSION_WAIT_MS, () => {
      throw new Error(
        `could not drop the oldest messages of the shared session ${sessionId}: Redis did not answer within ${SESSION_WAIT_MS} ms`,
      );
    });
  }

  /** Sends the session's unsent blocks in order; stops at the first that fails, keeping it and those after it. */
  private async send(sessionId: string): Promise<void> {
    const blocks = this.unsent.get(sessionId);
    while (blocks && blocks.length > 0) {
      const block = blocks[0]!;
      try {
        await this.redis.eval(APPEND, 2, listKey(sessionId), blockKey(block.id), BLOCK_KEPT_MS, ...block.entries);
      } catch (err) {
        this.log.warn(
          { sessionId, unsent: blocks.length, error: errorText(err) },
          "could not add a run's messages to the shared session in Redis; kept until Redis is back",
        );
        return;
      }
      blocks.shift();
    }
    this.unsent.delete(sessionId);
  }

  /** Messages that fit are kept, run markers skipped; anything else is logged and skipped, as a file's torn line is. */
  private parse(sessionId: string, entries: readonly string[]): ChatMessage[] {
    const messages: ChatMessage[] = [];
    for (const [index, entry] of entries.entries()) {
      let value: unknown;
      try {
        value = JSON.parse(entry);
      } catch {
        this.log.warn({ sessionId, index, problem: "is not JSON" }, "shared session entry in Redis cannot be used; skipped");
        continue;
      }
      if (typeof value === "object" && value !== null && "run" in value && !("role" in value)) continue;
      const message = chatMessageShape.safeParse(value);
      if (message.success) messages.push(message.data);
      else
        this.log.warn(
          { sessionId, index, problem: message.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ") },
          "shared session entry in Redis cannot be used; skipped",
        );
    }
    return messages;
  }
}
