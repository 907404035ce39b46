import type { EventBus } from "../events.js";
import { verifyAnswer, signAnswer, type ApprovalAnswer } from "./links.js";
import type { AnsweredBy, AnswerResult, Approval, ApprovalStore, LinkCheck } from "./types.js";

/** Where a link leads: the console's answer page for one approval and one answer. */
export const LINK_PATH = "approval";

/**
 * The one place approvals are answered, by a link, the CLI, the console or a timeout: the store
 * keeps the first answer, and the run it suspended is handed to `resume` once.
 */
export class ApprovalDesk {
  constructor(
    private readonly opts: {
      store: ApprovalStore;
      /** The key links are signed with (links.ts approvalKey). */
      key: Buffer;
      /** Goes on with the run the answered approval suspended (triggers/approvals.ts). */
      resume: (approval: Approval) => void;
      /** Told of each answer given here (`approval.answered`), for the metrics. */
      events?: EventBus;
      now?: () => Date;
    },
  ) {}

  get store(): ApprovalStore {
    return this.opts.store;
  }

  list(): Promise<Approval[]> {
    return this.opts.store.list();
  }

  get(id: string): Promise<Approval | undefined> {
    return this.opts.store.get(id);
  }

  /** The answer given once; a later one, or one after the timeout, is refused and changes nothing. */
  async answer(id: string, answer: ApprovalAnswer | "timeout", by: AnsweredBy): Promise<AnswerResult> {
    const now = this.now();
    const approval = await this.opts.store.get(id);
    if (!approval) return { ok: false, why: "unknown" };
    if (approval.status !== "waiting") return { ok: false, why: "answered", approval };
    if (answer !== "timeout" && now.getTime() >= Date.parse(approval.expiresAt)) return { ok: false, why: "expired", approval };
    const result = await this.opts.store.answer(id, answer, by, now);
    if (!result.ok) return result;
    const { approval: answered } = result;
    if (answered.status !== "waiting")
      this.opts.events?.emit("approval.answered", {
        job: answered.job,
        run: answered.run,
        approval: id,
        answer: answered.status,
        via: by.via,
      });
    this.opts.resume(answered);
    return result;
  }

  /** The signed links of an approval's request: `base` is the console's address, ending in a slash. */
  links(approval: Approval, base: string): Record<ApprovalAnswer, string> {
    const link = (answer: ApprovalAnswer) => {
      const token = signAnswer(this.opts.key, {
        approval: approval.id,
        call: { run: approval.run, job: approval.job, hash: approval.hash },
        answer,
        expiresAt: Date.parse(approval.expiresAt),
      });
      return `${base}${LINK_PATH}/${encodeURIComponent(approval.id)}?answer=${answer}&token=${encodeURIComponent(token)}`;
    };
    return { approve: link("approve"), deny: link("deny") };
  }

  /** What a link may do now: its signature, its call, its time and whether the approval still waits. */
  async checkLink(id: string, token: string): Promise<LinkCheck> {
    const approval = await this.opts.store.get(id);
    if (!approval) return { ok: false, why: "unknown" };
    const verified = verifyAnswer(
      this.opts.key,
      token,
      { approval: approval.id, call: { run: approval.run, job: approval.job, hash: approval.hash } },
      this.now().getTime(),
    );
    if (!verified.ok) return { ok: false, why: verified.why, approval };
    if (approval.status !== "waiting") return { ok: false, why: "answered", approval };
    return { ok: true, approval, answer: verified.answer };
  }

  /** A link's answer, once its page was confirmed with a POST. */
  async answerLink(id: string, token: string, note?: string): Promise<LinkCheck> {
    const checked = await this.checkLink(id, token);
    if (!checked.ok) return checked;
    const answered = await this.answer(id, checked.answer, {
      via: "link",
      by: `${checked.answer} link`,
      ...(note ? { note } : {}),
    });
    return answered.ok ? { ok: true, approval: answered.approval, answer: checked.answer } : answered;
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }
}
