import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileApprovals } from "../../src/approvals/file-store.js";
import { callHash, newApprovalId } from "../../src/approvals/links.js";
import type { Approval } from "../../src/approvals/types.js";
import { suspendedRun } from "../support/approval-store-cases.js";
import { runCountd } from "../support/daemon-process.js";

let dir: string;
let state: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-approvals-cli-"));
  state = join(dir, "state");
  await writeFile(join(dir, "countd.yaml"), "timezone: UTC\n");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const countd = (...args: string[]) => runCountd(args, { cwd: dir });
const HOUR = 3_600_000;

/** A call asked `askedAgoMs` ago that waits 4 h: kept as the daemon keeps one when a run stops for it. */
async function seed(askedAgoMs: number, overrides: Partial<Approval> = {}): Promise<Approval> {
  const args = { command: "cd repo && git push origin main" };
  const askedAt = new Date(Date.now() - askedAgoMs).toISOString();
  const approval: Approval = {
    id: newApprovalId(),
    job: "release",
    run: "20261205T090000Z-3f2a",
    tool: "exec",
    arguments: args,
    hash: callHash("exec", args),
    rule: 'exec: "git push *"',
    askedAt,
    expiresAt: new Date(Date.parse(askedAt) + 4 * HOUR).toISOString(),
    onTimeout: "deny",
    reasoning: "The release branch is ready; pushing it.",
    status: "waiting",
    ...overrides,
  };
  await (await FileApprovals.open(state)).add(approval, suspendedRun(approval));
  return approval;
}

describe("countd approvals without a daemon", () => {
  it("lists the calls that wait, and with --all the answered ones with who answered and why", async () => {
    const waiting = await seed(HOUR);
    const answered = await seed(2 * HOUR, { job: "cleanup", tool: "mcp_files_delete", arguments: { path: "old/" } });
    await (await FileApprovals.open(state)).answer(answered.id, "deny", { via: "cli", by: "alice", note: "keep them" }, new Date());

    const listed = await countd("approvals");
    expect(listed.code).toBe(0);
    const [header, ...rows] = listed.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^ID +JOB +RUN +TOOL +ARGUMENTS +ASKED +EXPIRES$/);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain(`${waiting.id}  release  20261205T090000Z-3f2a  exec  {"command":"cd repo && git push origin main"}`);
    expect(rows[0]).toContain(` ${waiting.askedAt.slice(0, 10)} ${waiting.askedAt.slice(11, 19)} +00:00`);

    const all = await countd("approvals", "--all");
    expect(all.stdout.split("\n")[0]).toMatch(/^ID +JOB +RUN +TOOL +ARGUMENTS +ASKED +EXPIRES +STATUS +ANSWERED +NOTE$/);
    expect(all.stdout).toContain(waiting.id);
    expect(all.stdout).toMatch(new RegExp(`${answered.id}  cleanup .* denied +alice \\(cli\\) .* keep them\\n`));
  });

  it("prints them as a JSON array with --json", async () => {
    const waiting = await seed(HOUR);
    const result = await countd("approvals", "--json");
    expect(result.code).toBe(0);
    const listed = JSON.parse(result.stdout) as Array<Record<string, unknown>>;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      id: waiting.id,
      job: "release",
      run: "20261205T090000Z-3f2a",
      tool: "exec",
      arguments: { command: "cd repo && git push origin main" },
      asked_at: waiting.askedAt,
      expires_at: waiting.expiresAt,
      status: "waiting",
    });
  });

  it("approves once, as the login that ran it, and refuses a second answer", async () => {
    const waiting = await seed(HOUR);
    const approved = await countd("approve", waiting.id, "--note", "release day");
    expect(approved).toMatchObject({ code: 0, stderr: "" });
    expect(approved.stdout).toBe(
      `approved ${waiting.id} (job release, run 20261205T090000Z-3f2a): the run goes on when the daemon starts (countd start)\n`,
    );
    const kept = await (await FileApprovals.open(state)).get(waiting.id);
    expect(kept).toMatchObject({
      status: "approved",
      answer: { answer: "approve", via: "cli", by: userInfo().username, note: "release day" },
    });

    const again = await countd("deny", waiting.id);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`approval ${waiting.id} is already answered: approved by ${userInfo().username} (cli)`);
    expect((await (await FileApprovals.open(state)).get(waiting.id))?.status).toBe("approved");
  });

  it("denies with a reason, and refuses an expired call and an unknown id", async () => {
    const waiting = await seed(HOUR);
    const denied = await countd("deny", waiting.id, "--reason", "not on a Friday");
    expect(denied.code).toBe(0);
    expect(denied.stdout).toContain(`denied ${waiting.id} (job release, run 20261205T090000Z-3f2a)`);
    expect(await (await FileApprovals.open(state)).get(waiting.id)).toMatchObject({
      status: "denied",
      answer: { answer: "deny", via: "cli", note: "not on a Friday" },
    });

    const expired = await seed(5 * HOUR);
    const late = await countd("approve", expired.id);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain(`approval ${expired.id} expired at ${expired.expiresAt.slice(0, 10)}`);
    expect((await (await FileApprovals.open(state)).get(expired.id))?.status).toBe("waiting");

    const unknown = await countd("deny", "no-such-approval");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe("countd: no approval no-such-approval (countd approvals --all lists them)\n");
  });

  it("exits 2 when the id is missing", async () => {
    expect((await countd("approve")).code).toBe(2);
  });
});
