import { chromium, type Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startApprovalConsole, type ApprovalConsole } from "../support/approval-console.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";

/*
 * The console's Approvals page as a person uses it in Debian's Chromium: the navigation's badge
 * counts what waits, Approve with a note answers once, and the call moves to the answered ones.
 * Then an approval link opened in the browser, confirmed with its form.
 */

const WAIT_MS = 20_000;
const TEST_MS = 60_000;

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

describe.skipIf(!hasChromium)("the Approvals page in Chromium", () => {
  let browser: Browser;
  const started: ApprovalConsole[] = [];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  }, TEST_MS);
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    for (const c of started.splice(0)) await c.stop();
  });

  it("counts waiting calls in the navigation, approves one with a note and shows it answered", { timeout: TEST_MS }, async () => {
    const c = await startApprovalConsole();
    started.push(c);
    const push = await c.ask({ arguments: { command: "git push origin main" } });
    await c.ask({ run: "20260301T090000Z-tag", arguments: { command: "git push origin v1.2" } });

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    await page.goto(`${c.origin}/?token=${encodeURIComponent(c.token)}`);
    await page.locator("h1", { hasText: "Overview" }).waitFor();
    const nav = page.getByRole("navigation", { name: "Sections" });
    await nav.getByText("2", { exact: true }).waitFor();

    await nav.getByRole("link", { name: /Approvals/ }).click();
    await page.getByRole("heading", { name: "Waiting (2)" }).waitFor();
    const card = page.getByRole("article", { name: "exec in release" }).filter({ hasText: "git push origin main" });
    expect(await card.locator("pre.arguments").textContent()).toContain('"command": "git push origin main"');
    expect(await card.getByRole("link", { name: push.run }).getAttribute("href")).toBe(`#/runs/release/${push.run}`);
    await card.getByLabel("Note or reason (optional)").fill("release day");
    await card.getByRole("button", { name: "Approve exec of release" }).click();

    await page.getByRole("heading", { name: "Answered (1)" }).waitFor();
    await page.getByRole("heading", { name: "Waiting (1)" }).waitFor();
    await nav.getByText("1", { exact: true }).waitFor();
    const answered = page.getByRole("article", { name: "exec in release, approved" });
    expect(await answered.textContent()).toMatch(/approved by console session [A-Za-z0-9_-]{8} \(console\).*release day/);
    expect(await c.desk.get(push.id)).toMatchObject({
      status: "approved",
      answer: { via: "console", by: expect.stringMatching(/^console session /), note: "release day" },
    });
    expect(c.resumed.map((a) => a.id)).toEqual([push.id]);
    await context.close();
  });

  it("answers an approval link in a browser that is not signed in, after its confirmation page", { timeout: TEST_MS }, async () => {
    const c = await startApprovalConsole();
    started.push(c);
    const a = await c.ask();
    const context = await browser.newContext();
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    await page.goto(c.desk.links(a, `${c.origin}/`).deny);
    await page.getByRole("heading", { name: "Deny this call?" }).waitFor();
    expect(await c.desk.get(a.id)).toMatchObject({ status: "waiting" });
    await page.getByLabel(/^Reason/).fill("not today");
    await page.getByRole("button", { name: "Deny" }).click();
    await page.getByRole("heading", { name: "Denied." }).waitFor();
    expect(await c.desk.get(a.id)).toMatchObject({ status: "denied", answer: { via: "link", note: "not today" } });
    expect(await context.cookies()).toEqual([]);
    await context.close();
  });
});
