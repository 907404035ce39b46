import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { approvalKey, callHash, newApprovalId, signAnswer, verifyAnswer, type ApprovalCall } from "../../src/approvals/links.js";

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-approval-links-"));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const now = Date.parse("2026-05-01T09:00:00Z");
const expiresAt = now + 4 * 3_600_000;
const call: ApprovalCall = { run: "20260501T090000Z-3f2a", job: "release", hash: callHash("exec", { command: "git push origin main" }) };

/** The token with one byte of its signed payload or of its signature changed, re-encoded so it still parses. */
function flipped(token: string, part: 0 | 1): string {
  const parts = token.split(".");
  const bytes = Buffer.from(parts[part]!, "base64url");
  bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
  parts[part] = bytes.toString("base64url");
  return parts.join(".");
}

describe("signed approval answers", () => {
  it("makes ids a command line cannot take for an option", () => {
    const ids = Array.from({ length: 2_000 }, () => newApprovalId());
    expect(ids.filter((id) => id.startsWith("-"))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
  });

  it("verifies a token signed for its approval and call", async () => {
    const key = await approvalKey(stateDir);
    const approval = newApprovalId();
    const token = signAnswer(key, { approval, call, answer: "approve", expiresAt });
    expect(token).toMatch(/^[A-Za-z0-9_.-]+$/);

    expect(verifyAnswer(key, token, { approval, call }, now)).toEqual({ ok: true, answer: "approve" });
  });

  it("refuses a token with a byte changed, or signed with another key, as forged", async () => {
    const key = await approvalKey(stateDir);
    const approval = newApprovalId();
    const deny = signAnswer(key, { approval, call, answer: "deny", expiresAt });
    const expected = { approval, call };

    expect(verifyAnswer(key, flipped(deny, 0), expected, now)).toEqual({ ok: false, why: "forged" });
    expect(verifyAnswer(key, flipped(deny, 1), expected, now)).toEqual({ ok: false, why: "forged" });
    // A deny link turned into an approve link by rewriting its payload.
    const [payload, mac] = deny.split(".");
    const approve = Buffer.from(Buffer.from(payload!, "base64url").toString("utf8").replace('"deny"', '"approve"')).toString("base64url");
    expect(verifyAnswer(key, `${approve}.${mac}`, expected, now)).toEqual({ ok: false, why: "forged" });

    const otherKey = await approvalKey(await mkdtemp(join(stateDir, "other-")));
    expect(verifyAnswer(otherKey, deny, expected, now)).toEqual({ ok: false, why: "forged" });
  });

  it("refuses a token at and after its expiry", async () => {
    const key = await approvalKey(stateDir);
    const approval = newApprovalId();
    const token = signAnswer(key, { approval, call, answer: "approve", expiresAt });
    expect(verifyAnswer(key, token, { approval, call }, expiresAt - 1)).toEqual({ ok: true, answer: "approve" });
    expect(verifyAnswer(key, token, { approval, call }, expiresAt)).toEqual({ ok: false, why: "expired" });
    expect(verifyAnswer(key, token, { approval, call }, expiresAt + 3_600_000)).toEqual({ ok: false, why: "expired" });
  });

  it("refuses a token of another approval, run, job or call", async () => {
    const key = await approvalKey(stateDir);
    const approval = newApprovalId();
    const token = signAnswer(key, { approval, call, answer: "approve", expiresAt });
    const refused = { ok: false, why: "other call" };
    expect(verifyAnswer(key, token, { approval: newApprovalId(), call }, now)).toEqual(refused);
    expect(verifyAnswer(key, token, { approval, call: { ...call, run: "20260501T100000Z-9c41" } }, now)).toEqual(refused);
    expect(verifyAnswer(key, token, { approval, call: { ...call, job: "other" } }, now)).toEqual(refused);
    const otherCall = { ...call, hash: callHash("exec", { command: "git push --force origin main" }) };
    expect(verifyAnswer(key, token, { approval, call: otherCall }, now)).toEqual(refused);
  });

  it("refuses what is not a token as malformed", async () => {
    const key = await approvalKey(stateDir);
    const approval = newApprovalId();
    for (const garbage of ["", "hello", "a.b.c", "abc.def", "not base64!.x", `${Buffer.from("[1,2]").toString("base64url")}.`]) {
      expect(verifyAnswer(key, garbage, { approval, call }, now), garbage).toEqual({ ok: false, why: "malformed" });
    }
  });

  it("hashes a call's arguments whatever the order of their keys", () => {
    expect(callHash("web_fetch", { url: "https://a.example.com", method: "POST" })).toBe(
      callHash("web_fetch", { method: "POST", url: "https://a.example.com" }),
    );
    expect(callHash("web_fetch", { method: "POST" })).not.toBe(callHash("web_fetch", { method: "GET" }));
    expect(callHash("exec", {})).not.toBe(callHash("read_file", {}));
  });

  it("keeps one key in a 0600 file, the same at every call", async () => {
    const first = await approvalKey(stateDir);
    expect(first.length).toBe(32);
    const file = join(stateDir, "approval.key");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await approvalKey(stateDir)).equals(first)).toBe(true);
    expect(Buffer.from((await readFile(file, "utf8")).trim(), "base64url").equals(first)).toBe(true);
  });
});
