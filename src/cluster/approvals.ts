import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import type { z } from "zod";
import type { ApprovalAnswer } from "../approvals/links.js";
import { ANSWERED_STATUS, answerShape, approvalShape, readStored, suspendedRunShape } from "../approvals/shapes.js";
import type { AnsweredBy, AnswerResult, Approval, ApprovalStore, SuspendedRun } from "../approvals/types.js";
import { silentLogger, type Logger } from "../log.js";

/** Every approval's id, scored by when it was asked (ms): what `list` reads. */
const INDEX_KEY = "countd:approvals";
/** An approval as asked (JSON), its answer once given, and its run until resumed; ids hold no ":" (newApprovalId). */
const approvalKey = (id: string) => `countd:approval:${id}`;
const answerKey = (id: string) => `countd:approval:${id}:answer`;
const runKey = (id: string) => `countd:approval:${id}:run`;
/** The key approval links are signed with, the same on every node. */
const SIGNING_KEY = "countd:approval-key";

/** Answered approvals go this long after their answer, as the files of a daemon alone are dropped. */
const KEPT_MS = 30 * 86_400_000;

/** What newApprovalId makes: anything else (another key's name above all) names no approval. */
const ID = /^[A-Za-z0-9_-]+$/;

/**
 * Gives the answer once, in one step: a first answer is kept, and the approval, its answer and its
 * run then expire together; a later one changes nothing. KEYS: approval, answer, run; ARGV: the
 * answer (JSON), when the three expire (epoch ms). Returns -1 for no such approval, 0 when
 * answered already, 1 when this answer is the one kept.
 */
const ANSWER = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX') then return 0 end
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
redis.call('PEXPIREAT', KEYS[3], ARGV[2])
return 1
`;

/**
 * A cluster's approvals, in its Redis: a run suspended on one node is listed, answered and resumed
 * on any node. The first answer is kept by SET NX in one Lua step, so the first answer wins across
 * nodes; a run is handed over by DEL, which removes it for one caller only. Answered approvals
 * expire 30 days after their answer; the index drops them as it is listed.
 */
export class RedisApprovals implements ApprovalStore {
  /** Damaged values already warned of: the console lists often, and one warning per key says it. */
  private readonly reported = new Set<string>();
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    opts: { log?: Logger } = {},
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "approvals" });
  }

  async list(): Promise<Approval[]> {
    const ids = (await this.redis.zrange(INDEX_KEY, 0, -1)).filter((id) => ID.test(id));
    if (ids.length === 0) return [];
    const texts = await this.redis.mget(ids.flatMap((id) => [approvalKey(id), answerKey(id)]));
    const approvals: Approval[] = [];
    const gone: string[] = [];
    for (const [i, id] of ids.entries()) {
      const [approval, answer] = [texts[2 * i] ?? null, texts[2 * i + 1] ?? null];
      if (approval === null) gone.push(id);
      else {
        const merged = this.merge(id, approval, answer);
        if (merged) approvals.push(merged);
      }
    }
    // Expired with their answer: the index is the one key that does not expire by itself.
    if (gone.length > 0) await this.redis.zrem(INDEX_KEY, ...gone);
    return approvals.sort((a, b) => Date.parse(b.askedAt) - Date.parse(a.askedAt) || a.id.localeCompare(b.id));
  }

  async get(id: string): Promise<Approval | undefined> {
    if (!ID.test(id)) return undefined;
    const [approval, answer] = await this.redis.mget(approvalKey(id), answerKey(id));
    return approval === null || approval === undefined ? undefined : this.merge(id, approval, answer ?? null);
  }

  async add(approval: Approval, run: SuspendedRun): Promise<void> {
    if (!ID.test(approval.id))
      throw new Error(`an approval's id must be letters, digits, - and _ (newApprovalId), got ${JSON.stringify(approval.id)}`);
    // One transaction: an approval that can be listed, and so answered, always has its run.
    await this.redis
      .multi()
      .set(runKey(approval.id), JSON.stringify(run))
      .set(approvalKey(approval.id), JSON.stringify(approval))
      .zadd(INDEX_KEY, Date.parse(approval.askedAt), approval.id)
      .exec()
      .then(failed);
  }

  async answer(id: string, answer: ApprovalAnswer | "timeout", by: AnsweredBy, at: Date): Promise<AnswerResult> {
    const approval = await this.get(id);
    if (!approval) return { ok: false, why: "unknown" };
    if (approval.status !== "waiting") return { ok: false, why: "answered", approval };
    const kept: z.infer<typeof answerShape> = {
      answer,
      via: by.via,
      by: by.by,
      ...(by.note !== undefined ? { note: by.note } : {}),
      at: at.toISOString(),
    };
    const done = await this.redis.eval(ANSWER, 3, approvalKey(id), answerKey(id), runKey(id), JSON.stringify(kept), at.getTime() + KEPT_MS);
    if (done !== 1) {
      const answered = done === 0 ? await this.get(id) : undefined;
      return answered ? { ok: false, why: "answered", approval: answered } : { ok: false, why: "unknown" };
    }
    return { ok: true, approval: { ...approval, status: ANSWERED_STATUS[answer], answer: kept } };
  }

  async suspended(id: string): Promise<SuspendedRun | undefined> {
    if (!ID.test(id)) return undefined;
    const text = await this.redis.get(runKey(id));
    return text === null ? undefined : this.parse(runKey(id), text, suspendedRunShape);
  }

  async resumed(id: string): Promise<boolean> {
    if (!ID.test(id)) return false;
    // DEL removes the run for one caller only, whichever node it is on.
    return (await this.redis.del(runKey(id))) === 1;
  }

  private merge(id: string, approvalText: string, answerText: string | null): Approval | undefined {
    const approval = this.parse(approvalKey(id), approvalText, approvalShape);
    if (!approval) return undefined;
    const answer = answerText === null ? undefined : this.parse(answerKey(id), answerText, answerShape);
    return answer ? { ...approval, status: ANSWERED_STATUS[answer.answer], answer } : approval;
  }

  /** The value if it fits `shape`; undefined when it is damaged, which is warned of once per key. */
  private parse<T>(key: string, text: string, shape: z.ZodType<T>): T | undefined {
    const read = readStored(text, shape);
    if ("value" in read) return read.value;
    this.report(key, read.problem);
    return undefined;
  }

  private report(key: string, problem: string): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.log.warn({ key, problem }, "an approval in Redis cannot be read; skipped until it is repaired or removed");
  }
}

/** A transaction's first failed command, thrown: ioredis resolves exec() with each command's error beside its result. */
function failed(results: Array<[Error | null, unknown]> | null): void {
  if (results === null) throw new Error("the approval's transaction was aborted");
  const error = results.find(([err]) => err)?.[0];
  if (error) throw error;
}

/**
 * The key approval links are signed with, the same on every node: 32 random bytes (base64url) made
 * by the first node to ask (SET NX, so two nodes asking at once keep one) and read thereafter. It
 * never expires: links already sent must still verify. Anyone holding it can answer every approval.
 */
export async function clusterApprovalKey(redis: Redis): Promise<Buffer> {
  await redis.set(SIGNING_KEY, randomBytes(32).toString("base64url"), "NX");
  const text = await redis.get(SIGNING_KEY);
  const key = Buffer.from(text ?? "", "base64url");
  if (text === null || key.length !== 32 || key.toString("base64url") !== text)
    throw new Error(`Redis key ${SIGNING_KEY} holds no approval key (32 bytes, base64url); delete it and countd makes a new one`);
  return key;
}
