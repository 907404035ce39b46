import { afterEach, describe, expect, it } from "vitest";
import type { Approval } from "../../src/approvals/types.js";
import { startApprovalConsole, type ApprovalConsole } from "../support/approval-console.js";

/*
 * The console's side of approvals over real HTTP: the API under /api/ (the console's token), and
 * the pages an approval request's links open, which take no token and answer once, on a POST.
 */

describe("approvals in the console", { timeout: 30_000 }, () => {
  const started: ApprovalConsole[] = [];
  afterEach(async () => {
    for (const c of started.splice(0)) await c.stop();
  });
  const start = async (opts: { now?: () => Date } = {}) => {
    const c = await startApprovalConsole(opts);
    started.push(c);
    return c;
  };

  /** The link's path and query, as the mail carries it. */
  const linkOf = (c: ApprovalConsole, a: Approval, answer: "approve" | "deny") => new URL(c.desk.links(a, `${c.origin}/`)[answer]);
  const post = (c: ApprovalConsole, link: URL, fields: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${c.origin}${link.pathname}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: c.origin, ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  const confirm = (c: ApprovalConsole, link: URL, note?: string) =>
    post(c, link, { answer: link.searchParams.get("answer")!, token: link.searchParams.get("token")!, ...(note ? { note } : {}) });
  const statusOf = async (c: ApprovalConsole, id: string) => (await c.desk.get(id))!.status;

  it("shows a link's confirmation page on GET and HEAD, and answers nothing however often a scanner follows it", async () => {
    const c = await start();
    const a = await c.ask({ arguments: { command: "git push origin main", note: "<script>alert(1)</script>" } });
    const link = linkOf(c, a, "approve");
    for (let i = 0; i < 3; i++) {
      const page = await fetch(link);
      expect(page.status).toBe(200);
      expect(page.headers.get("set-cookie")).toBeNull();
      expect(page.headers.get("cache-control")).toBe("no-store");
      const text = await page.text();
      expect(text).toContain("<h1>Approve this call?</h1>");
      expect(text).toContain('<form method="post" action="/approval/');
      expect(text).toContain("git push origin main");
      expect(text).toContain("The tests pass; pushing the release branch.");
      // The arguments are the model's: shown, never run.
      expect(text).not.toContain("<script>");
      expect(text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    }
    const head = await fetch(link, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await statusOf(c, a.id)).toBe("waiting");
    expect(c.resumed).toEqual([]);
  });

  it("answers a link's POST once: the run is resumed once, and the same link again is refused as already answered", async () => {
    const c = await start();
    const a = await c.ask();
    const link = linkOf(c, a, "approve");
    const done = await confirm(c, link, "ship it");
    expect(done.status).toBe(200);
    expect(done.headers.get("set-cookie")).toBeNull();
    expect(await done.text()).toContain("Approved. The run goes on.");
    expect(c.resumed.map((r) => r.id)).toEqual([a.id]);
    expect(await c.desk.get(a.id)).toMatchObject({
      status: "approved",
      answer: { answer: "approve", via: "link", by: "approve link", note: "ship it" },
    });

    const again = await confirm(c, link);
    expect(again.status).toBe(410);
    expect(await again.text()).toContain("This request was already answered");
    // The other link of the same request is refused too.
    const deny = await confirm(c, linkOf(c, a, "deny"));
    expect(deny.status).toBe(410);
    const page = await fetch(link);
    expect(page.status).toBe(410);
    expect(c.resumed).toHaveLength(1);
  });

  it("denies with the deny link, keeping the reason", async () => {
    const c = await start();
    const a = await c.ask();
    const done = await confirm(c, linkOf(c, a, "deny"), "not on a Friday");
    expect(done.status).toBe(200);
    expect(await done.text()).toContain("<h1>Denied.</h1>");
    expect(await c.desk.get(a.id)).toMatchObject({ status: "denied", answer: { answer: "deny", via: "link", note: "not on a Friday" } });
    expect(c.resumed.map((r) => r.id)).toEqual([a.id]);
  });

  it("refuses a forged token, another call's link, a changed answer and an unknown id, answering nothing", async () => {
    const c = await start();
    const a = await c.ask();
    const b = await c.ask({ run: "20260301T090000Z-other", arguments: { command: "git push origin other" } });
    const link = linkOf(c, a, "approve");
    const token = link.searchParams.get("token")!;
    const [body, mac] = token.split(".") as [string, string];
    const forged = `${body}.${mac.startsWith("A") ? "B" : "A"}${mac.slice(1)}`;
    for (const path of [`${link.pathname}?answer=approve&token=${forged}`]) {
      const page = await fetch(`${c.origin}${path}`);
      expect(page.status).toBe(403);
      expect(await page.text()).toContain("This link is forged");
    }
    const forgedPost = await post(c, link, { answer: "approve", token: forged });
    expect(forgedPost.status).toBe(403);
    expect(await forgedPost.text()).toContain("This link is forged");

    // b's token on a's page: signed by countd, but for another call.
    const other = linkOf(c, b, "approve").searchParams.get("token")!;
    const otherPost = await post(c, link, { answer: "approve", token: other });
    expect(otherPost.status).toBe(403);
    expect(await otherPost.text()).toContain("This link is for another call");

    // The deny link's token with the answer changed to approve.
    const denyToken = linkOf(c, a, "deny").searchParams.get("token")!;
    expect((await post(c, link, { answer: "approve", token: denyToken })).status).toBe(403);

    const malformed = await post(c, link, { answer: "approve", token: "not-a-token" });
    expect(malformed.status).toBe(403);
    expect(await malformed.text()).toContain("This link is damaged");

    const unknown = await fetch(`${c.origin}/approval/nosuchid?answer=approve&token=${token}`);
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain("No such request");

    // Another site's page posting a stolen token is refused by its Origin.
    expect((await post(c, link, { answer: "approve", token }, { origin: "http://evil.example" })).status).toBe(403);

    expect(await statusOf(c, a.id)).toBe("waiting");
    expect(await statusOf(c, b.id)).toBe("waiting");
    expect(c.resumed).toEqual([]);
  });

  it("refuses an expired link with 410 on its page and its POST", async () => {
    let now = new Date();
    const c = await start({ now: () => now });
    const a = await c.ask();
    const link = linkOf(c, a, "approve");
    now = new Date(Date.parse(a.expiresAt) + 1000);
    const page = await fetch(link);
    expect(page.status).toBe(410);
    expect(await page.text()).toContain("This link has expired");
    const done = await confirm(c, link);
    expect(done.status).toBe(410);
    expect(await statusOf(c, a.id)).toBe("waiting");
    expect(c.resumed).toEqual([]);
  });

  it("bounds the form's size", async () => {
    const c = await start();
    const a = await c.ask();
    const link = linkOf(c, a, "approve");
    const big = await confirm(c, link, "x".repeat(20_000));
    expect(big.status).toBe(413);
    expect(await statusOf(c, a.id)).toBe("waiting");
  });

  it("lists approvals under /api/ with the token only, and answers from the API once, naming who answered", async () => {
    const c = await start();
    const a = await c.ask();
    const b = await c.ask({ run: "20260301T090000Z-b" });
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`${c.origin}${path}`, { ...init, headers: { authorization: `Bearer ${c.token}`, ...(init.headers as object) } });

    expect((await fetch(`${c.origin}/api/approvals`)).status).toBe(401);
    expect((await fetch(`${c.origin}/api/approvals/${a.id}/approve`, { method: "POST" })).status).toBe(401);

    const listed = await api("/api/approvals");
    expect(listed.status).toBe(200);
    const { approvals } = (await listed.json()) as { approvals: Array<Record<string, unknown>> };
    expect(approvals.map((x) => x["id"])).toEqual([a.id, b.id]);
    expect(approvals[0]).toMatchObject({
      id: a.id,
      job: "release",
      run: a.run,
      tool: "exec",
      arguments: { command: "git push origin main" },
      asked_at: a.askedAt,
      expires_at: a.expiresAt,
      status: "waiting",
    });

    const approved = await api(`/api/approvals/${b.id}/approve`, {
      method: "POST",
      body: JSON.stringify({ note: "looks right", by: "ana" }),
    });
    expect(approved.status).toBe(200);
    expect(((await approved.json()) as any).approval).toMatchObject({
      id: b.id,
      status: "approved",
      answer: { answer: "approve", via: "cli", by: "ana", note: "looks right" },
    });
    const again = await api(`/api/approvals/${b.id}/deny`, { method: "POST", body: JSON.stringify({ reason: "too late" }) });
    expect(again.status).toBe(409);
    expect(((await again.json()) as any).error).toMatch(new RegExp(`^approval ${b.id} was already answered: approved by ana \\(cli\\)`));
    expect((await api("/api/approvals/nosuchid/approve", { method: "POST" })).status).toBe(404);
    const typo = await api(`/api/approvals/${a.id}/deny`, { method: "POST", body: JSON.stringify({ note: "x" }) });
    expect(typo.status).toBe(400);
    expect(((await typo.json()) as any).error).toBe('unknown field "note": give reason, by');

    // Waiting first; the answered below.
    const after = ((await (await api("/api/approvals")).json()) as any).approvals;
    expect(after.map((x: any) => [x.id, x.status])).toEqual([
      [a.id, "waiting"],
      [b.id, "approved"],
    ]);
    expect(c.resumed.map((r) => r.id)).toEqual([b.id]);
  });
});
