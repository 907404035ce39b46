import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileApprovals } from "../../src/approvals/file-store.js";
import { newApprovalId } from "../../src/approvals/links.js";
import { approval, approvalStoreCases, suspendedRun, yesterday } from "../support/approval-store-cases.js";

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-approval-store-"));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const DAY = 86_400_000;

describe("the approvals' file store", () => {
  // Each store opened on the one state directory, as the daemon and the CLI open it.
  approvalStoreCases({
    open: (opts) => FileApprovals.open(stateDir, opts),
    damage: async (id, _askedAt, text) => {
      const file = join(stateDir, "approvals", `${id}.json`);
      await writeFile(file, text);
      return file;
    },
    where: "file",
  });

  it("treats an id that is no approval's, such as a path, as unknown", async () => {
    const store = await FileApprovals.open(stateDir);
    await writeFile(join(stateDir, "secret.json"), JSON.stringify(approval(yesterday(9))));
    expect(await store.get("../secret")).toBeUndefined();
    expect(await store.answer("../secret", "approve", { via: "cli", by: "alice" }, new Date())).toEqual({ ok: false, why: "unknown" });
  });

  it("drops at open every file of an approval answered more than 30 days ago, and an answer whose approval is gone", async () => {
    const store = await FileApprovals.open(stateDir);
    const old = approval(new Date(Date.now() - 40 * DAY).toISOString());
    await store.add(old, suspendedRun(old));
    await store.answer(old.id, "approve", { via: "cli", by: "alice" }, new Date(Date.now() - 31 * DAY));

    // What a drop cut short by a crash leaves: an answer whose approval is gone.
    const orphan = join(stateDir, "approvals", `${newApprovalId()}.answer.json`);
    await writeFile(orphan, JSON.stringify({ answer: "approve", via: "cli", by: "alice", at: yesterday(9) }));

    await FileApprovals.open(stateDir);
    await expect(readFile(orphan)).rejects.toThrow(/ENOENT/);
    expect((await readdir(join(stateDir, "approvals"))).filter((name) => name.startsWith(old.id))).toEqual([]);
  });
});
