import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileApprovals } from "../../src/approvals/file-store.js";
import { callHash, newApprovalId } from "../../src/approvals/links.js";
import type { Approval, SuspendedRun } from "../../src/approvals/types.js";
import { captureLog } from "../support/log-capture.js";

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-approval-store-"));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const DAY = 86_400_000;
/** A time yesterday, `hour` hours after midnight UTC: recent enough to be kept at open. */
const yesterday = (hour: number): string => new Date(Math.floor(Date.now() / DAY) * DAY - DAY + hour * 3_600_000).toISOString();

function approval(askedAt: string, overrides: Partial<Approval> = {}): Approval {
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

function suspendedRun(a: Approval): SuspendedRun {
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

describe("the approvals' file store", () => {
  it("keeps an approval and lists them newest first, also after a reopen", async () => {
    const store = await FileApprovals.open(stateDir);
    const older = approval(yesterday(9));
    const newer = approval(yesterday(10), { tool: "send_mail", arguments: { to: "ops@example.com" } });
    await store.add(older, suspendedRun(older));
    await store.add(newer, suspendedRun(newer));

    expect(await store.get(older.id)).toEqual(older);
    expect((await store.list()).map((a) => a.id)).toEqual([newer.id, older.id]);
    expect(await store.get(newApprovalId())).toBeUndefined();

    const reopened = await FileApprovals.open(stateDir);
    expect(await reopened.list()).toEqual([newer, older]);
    expect(await reopened.suspended(older.id)).toEqual(suspendedRun(older));
  });

  it("keeps the first answer only, also between two stores on one folder answering at once", async () => {
    const first = await FileApprovals.open(stateDir);
    const second = await FileApprovals.open(stateDir);
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
    expect(await (await FileApprovals.open(stateDir)).get(a.id)).toEqual(kept);

    const later = await second.answer(a.id, "deny", { via: "console", by: "session 7f" }, new Date());
    expect(later).toEqual({ ok: false, why: "answered", approval: kept });
  });

  it("records the answer, who gave it and when, as the approval's status", async () => {
    const store = await FileApprovals.open(stateDir);
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
      expect(await (await FileApprovals.open(stateDir)).get(a.id)).toEqual(result.approval);
    }
    expect(await store.answer(newApprovalId(), "approve", { via: "cli", by: "alice" }, new Date())).toEqual({ ok: false, why: "unknown" });
  });

  it("treats an id that is no approval's, such as a path, as unknown", async () => {
    const store = await FileApprovals.open(stateDir);
    await writeFile(join(stateDir, "secret.json"), JSON.stringify(approval(yesterday(9))));
    expect(await store.get("../secret")).toBeUndefined();
    expect(await store.answer("../secret", "approve", { via: "cli", by: "alice" }, new Date())).toEqual({ ok: false, why: "unknown" });
  });

  it("skips a damaged approval file in the list and says which file and why, once", async () => {
    const { log, lines } = captureLog();
    const store = await FileApprovals.open(stateDir, { log });
    const good = approval(yesterday(9));
    await store.add(good, suspendedRun(good));
    const torn = join(stateDir, "approvals", `${newApprovalId()}.json`);
    await writeFile(torn, '{"id": "abc", "job": "rel');
    const misshapen = join(stateDir, "approvals", `${newApprovalId()}.json`);
    await writeFile(misshapen, JSON.stringify({ ...approval(yesterday(11)), askedAt: "yesterday" }));

    expect(await store.list()).toEqual([good]);
    expect(await store.list()).toEqual([good]);
    const warnings = lines.filter((line) => line.level === "warn");
    expect(warnings.map((line) => line.fields.file).sort()).toEqual([torn, misshapen].sort());
    expect(warnings.find((line) => line.fields.file === misshapen)!.fields.problem).toMatch(/askedAt/);
    expect(warnings[0]!.msg).toMatch(/skipped/);
  });

  it("hands a suspended run over until it is resumed, once", async () => {
    const first = await FileApprovals.open(stateDir);
    const second = await FileApprovals.open(stateDir);
    const a = approval(yesterday(9));
    await first.add(a, suspendedRun(a));

    expect(await second.suspended(a.id)).toEqual(suspendedRun(a));
    expect(await Promise.all([first.resumed(a.id), second.resumed(a.id)])).toEqual(expect.arrayContaining([true, false]));
    expect(await first.suspended(a.id)).toBeUndefined();
    expect(await first.resumed(a.id)).toBe(false);
    expect(await first.get(a.id)).toEqual(a);
  });

  it("drops at open the approvals answered more than 30 days ago, and keeps the rest", async () => {
    const store = await FileApprovals.open(stateDir);
    const old = approval(new Date(Date.now() - 40 * DAY).toISOString());
    const recent = approval(new Date(Date.now() - 40 * DAY).toISOString());
    const waiting = approval(new Date(Date.now() - 40 * DAY).toISOString());
    for (const a of [old, recent, waiting]) await store.add(a, suspendedRun(a));
    await store.answer(old.id, "approve", { via: "cli", by: "alice" }, new Date(Date.now() - 31 * DAY));
    await store.answer(recent.id, "deny", { via: "cli", by: "alice" }, new Date(Date.now() - 29 * DAY));

    const reopened = await FileApprovals.open(stateDir);
    expect((await reopened.list()).map((a) => a.id).sort()).toEqual([recent.id, waiting.id].sort());
    expect((await readdir(join(stateDir, "approvals"))).filter((name) => name.startsWith(old.id))).toEqual([]);
  });
});
