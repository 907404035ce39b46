import { randomUUID } from "node:crypto";
import ms from "ms";
import pLimit, { type LimitFunction } from "p-limit";
import { CancelToken } from "./cancel.js";
import type { AgentLoop } from "./loop.js";
import { FinalToolError } from "../tools/types.js";
import type { JournalWriter } from "../store/journal-entries.js";

export interface SubagentOptions {
  /** Subagents running at once across every run of the daemon; the rest wait their turn. */
  maxConcurrent: number;
  /** Longest wait for one subagent's answer, its wait for a slot included. */
  timeoutMs: number;
}

/** Not tried again: the subagent may have acted, and another attempt would take as long again. */
export class SubagentTimeout extends FinalToolError {
  override readonly name = "SubagentTimeout";
}

/** Runs delegated tasks in their own sessions (`subagent:<id>`), a bounded number at a time. */
export class SubagentManager {
  private readonly limit: LimitFunction;

  constructor(private readonly opts: SubagentOptions) {
    this.limit = pLimit(opts.maxConcurrent);
  }

  /**
   * Runs `task` on `loop` (the subagent's own: fewer tools, no spawn, fewer iterations) and
   * resolves with its answer; a parent's cancel or the timeout cancels the subagent too. Its steps
   * go into its parent's journal, marked with its id.
   */
  async run(loop: AgentLoop, task: string, parentSignal: AbortSignal, parent?: JournalWriter): Promise<{ id: string; answer: string }> {
    const id = randomUUID().slice(0, 8);
    const journal = parent?.nested(id);
    journal?.write({ kind: "subagent", task });
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    const cancel = CancelToken.from(AbortSignal.any([parentSignal, timeout]));
    const answer = await this.limit(async () =>
      cancel.cancelled
        ? ""
        : (await loop.processDirect(task, `subagent:${id}`, { channel: "subagent", cancelToken: cancel, ...(journal ? { journal } : {}) }))
            .answer,
    );
    if (timeout.aborted) {
      throw new SubagentTimeout(`subagent ${id} gave no answer within ${ms(this.opts.timeoutMs, { long: true })} and was stopped`);
    }
    if (parentSignal.aborted) throw new Error(`subagent ${id} was cancelled with its parent run`);
    return { id, answer };
  }
}
