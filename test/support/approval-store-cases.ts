import type { Logger } from "pino";
import { expect, it } from "vitest";
import { callHash, newApprovalId } from "../../src/approvals/links.js";
import type { Approval, ApprovalStore, SuspendedRun } from "../../src/approvals/types.js";
import { captureLog } from "./log-capture.js";

/** Where a kind of approval store keeps its approvals, for the cases every store must pass. */
export interface ApprovalStoreKind {
  /**
   * A store on the test's one backing: each call a new one (another process's, another node's
   * connection), so two stores answering at once race as two processes or nodes do, and a store
   * opened later reads what the others kept.
   */
  open(opts?: { log?: Logger }): Promise<ApprovalStore>;
  /** Puts `text` where an approval with this id is kept; returns the place (file or Redis key) a warning names. */
  damage(id: string, askedAt: string, text: string): Promise<string>;
  /** The field of a warning that names the damaged place. */
  where: "file" | "key";
}

const DAY = 86_400_000;
/** A time yesterday, `hour` hours after midnight UTC: recent enough to be kept. */
export const yesterday = (hour: number): string => new Date(Math.floor(Date.now() / DAY) * DAY - DAY + hour * 3_600_000).toISOString();

export function approval(askedAt: string, overrides: Partial<Approval> = {}): Approval {
  const args = { command: "git push origin main" };
  return {
    id: newApprovalId(),
    job: "release",
    run: "20260501T090000Z-3f2a",
    tool: "exec",
    arguments: args,
    hash: callHash("exec", args),
    rule: "exec: git push *",
    askedAt,
    expiresAt: new Date(Date.parse(askedAt) + 4 * 3_600_000).toISOString(),
    onTimeout: "deny",
    reasoning: "The release branch is ready; pushing it.",
    status: "waiting",
    ...overrides,
  };
}

export function suspendedRun(a: Approval): SuspendedRun {
  const call = {
    id: "call_1",
    name: "exec",
    arguments: { command: "git push origin main" },
    rawArguments: '{"command":"git push origin main"}',
  };
  return {
    job: a.job,
    run: a.run,
    startedAt: a.askedAt,
    reason: "cron",
    scheduledAt: a.askedAt,
    clockAt: a.askedAt,
    loop: {
      message: "Push the release.",
      said: "",
      rule: 'the command "git push origin main" matches "git push *"',
      messages: [
        { role: "user", content: "Push the release." },
        { role: "assistant", content: null, toolCalls: [call] },
      ],
      transcript: [{ role: "user", content: "Push the release." }],
      pending: [call],
      iterations: 1,
      toolCalls: 0,
      usage: { inputTokens: 120, outputTokens: 30, cachedInputTokens: 0, cacheWriteTokens: 0 },
      cost: null,
      calls: [],
      activeMs: 2_300,
    },
  };
}

/**
 * What every ApprovalStore does, the files of a daemon alone and a cluster's Redis alike: declared
 * as `it` cases inside the caller's describe block, whose hooks give each case a fresh backing.
 */
export function approvalStoreCases(kind: ApprovalStoreKind): void {
  it("keeps an approval and lists them newest first, also in a store opened later", async () => {
    const store = await kind.open();
    const older = approval(yesterday(9));
    const newer = approval(yesterday(10), { tool: "send_mail", arguments: { to: "ops@example.com" } });
    await store.add(older, suspendedRun(older));
    await store.add(newer, suspendedRun(newer));

    expect(await store.get(older.id)).toEqual(older);
    expect((await store.list()).map((a) => a.id)).toEqual([newer.id, older.id]);
    expect(await store.get(newApprovalId())).toBeUndefined();

    const reopened = await kind.open();
    expect(await reopened.list()).toEqual([newer, older]);
    expect(await reopened.suspended(older.id)).toEqual(suspendedRun(older));
  });

  it("keeps the first answer only, also between two stores answering at once", async () => {
    const first = await kind.open();
    const second = await kind.open();
    const a = approval(yesterday(9));
    await first.add(a, suspendedRun(a));
    const at = new Date(yesterday(9.5));

    const results = await Promise.all([
      first.answer(a.id, "approve", { via: "cli", by: "alice", note: "release day" }, at),
      second.answer(a.id, "timeout", { via: "timeout", by: "countd" }, at),
    ]);
    const won = results.filter((result) => result.ok);
    expect(won).toHaveLength(1);
    const lost = results.find((result) => !result.ok)!;
    expect(lost).toMatchObject({ ok: false, why: "answered" });
    expect(lost.approval).toEqual(won[0]!.approval);

    const kept = won[0]!.approval;
    expect(["approved", "expired"]).toContain(kept.status);
    expect(await first.get(a.id)).toEqual(kept);
    expect(await (await kind.open()).get(a.id)).toEqual(kept);

    const later = await second.answer(a.id, "deny", { via: "console", by: "session 7f" }, new Date());
    expect(later).toEqual({ ok: false, why: "answered", approval: kept });
  });

  it("records the answer, who gave it and when, as the approval's status", async () => {
    const store = await kind.open();
    const cases = [
      ["approve", "approved"],
      ["deny", "denied"],
      ["timeout", "expired"],
    ] as const;
    for (const [answer, status] of cases) {
      const a = approval(yesterday(9));
      await store.add(a, suspendedRun(a));
      const result = await store.answer(a.id, answer, { via: "cli", by: "alice", note: "checked" }, new Date(yesterday(9.5)));
      expect(result).toEqual({
        ok: true,
        approval: { ...a, status, answer: { answer, via: "cli", by: "alice", note: "checked", at: yesterday(9.5) } },
      });
      expect(await (await kind.open()).get(a.id)).toEqual(result.approval);
    }
    expect(await store.answer(newApprovalId(), "approve", { via: "cli", by: "alice" }, new Date())).toEqual({ ok: false, why: "unknown" });
  });

  it("skips a damaged approval in the list and says where and why, once", async () => {
    const { log, lines } = captureLog();
    const store = await kind.open({ log });
    const good = approval(yesterday(9));
    await store.add(good, suspendedRun(good));
    const torn = await kind.damage(newApprovalId(), yesterday(10), '{"id": "abc", "job": "rel');
    const misshapen = await kind.damage(
      newApprovalId(),
      yesterday(11),
      JSON.stringify({ ...approval(yesterday(11)), askedAt: "yesterday" }),
    );

    expect(await store.list()).toEqual([good]);
    expect(await store.list()).toEqual([good]);
    const warnings = lines.filter((line) => line.level === "warn");
    expect(warnings.map((line) => line.fields[kind.where]).sort()).toEqual([torn, misshapen].sort());
    expect(warnings.find((line) => line.fields[kind.where] === misshapen)!.fields.problem).toMatch(/askedAt/);
    expect(warnings[0]!.msg).toMatch(/skipped/);
  });

  it("hands a suspended run over until it is resumed, once", async () => {
    const first = await kind.open();
    const second = await kind.open();
    const a = approval(yesterday(9));
    await first.add(a, suspendedRun(a));

    expect(await second.suspended(a.id)).toEqual(suspendedRun(a));
    expect(await Promise.all([first.resumed(a.id), second.resumed(a.id)])).toEqual(expect.arrayContaining([true, false]));
    expect(await first.suspended(a.id)).toBeUndefined();
    expect(await first.resumed(a.id)).toBe(false);
    expect(await first.get(a.id)).toEqual(a);
  });

  it("drops the approvals answered more than 30 days ago, and keeps the rest", async () => {
    const store = await kind.open();
    const old = approval(new Date(Date.now() - 40 * DAY).toISOString());
    const recent = approval(new Date(Date.now() - 40 * DAY).toISOString());
    const waiting = approval(new Date(Date.now() - 40 * DAY).toISOString());
    for (const a of [old, recent, waiting]) await store.add(a, suspendedRun(a));
    await store.answer(old.id, "approve", { via: "cli", by: "alice" }, new Date(Date.now() - 31 * DAY));
    await store.answer(recent.id, "deny", { via: "cli", by: "alice" }, new Date(Date.now() - 29 * DAY));

    const reopened = await kind.open();
    expect((await reopened.list()).map((a) => a.id).sort()).toEqual([recent.id, waiting.id].sort());
    expect(await reopened.get(old.id)).toBeUndefined();
    expect(await reopened.suspended(old.id)).toBeUndefined();
    expect(await reopened.suspended(waiting.id)).toEqual(suspendedRun(waiting));
  });
}
