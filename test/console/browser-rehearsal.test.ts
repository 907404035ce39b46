import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, SLOW, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";

/*
 * The console's Rehearse, Replay and Fork as a user sees them in Debian's Chromium, against a
 * daemon in this process and the LLM simulator: the captured mail shown as its recipient would
 * see it, a replay that comes out identical, a fork whose answer differs.
 */

const SCREENSHOTS = resolve(import.meta.dirname, "../../docs/screenshots");
const WAIT_MS = 30_000;
const TEST_MS = 120_000;

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

describe.skipIf(!hasChromium)("Rehearse, Replay and Fork in Chromium", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let browser: Browser;
  let d: ConsoleDaemon;

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  }, TEST_MS);
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    await daemons.cleanup();
  });

  async function start(jobs: Record<string, string>): Promise<void> {
    const dir = await consoleFolder({ extra: "prices:\n  gpt-4o-mini: { input: 0.15, cached_input: 0.075, output: 0.6 }\n" });
    await writeFile(join(dir, "workspace", "numbers.csv"), "week,sales\n49,120\n");
    for (const [name, yaml] of Object.entries(jobs)) await writeJob(dir, name, yaml);
    d = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-browser-rehearsal" });
    daemons.started.push(d);
  }

  async function signedIn(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    await page.goto(`${d.origin}/?token=${encodeURIComponent(d.token)}`);
    await page.locator("h1", { hasText: "Overview" }).waitFor();
    return page;
  }

  it("rehearses a disabled job from its page and shows the mail it would have sent", { timeout: TEST_MS }, async () => {
    mock.onMessage("Write the Monday digest", { content: "## Digest\n\nSales were **120** in week 49." });
    await start({
      digest:
        "enabled: false\ndescription: The Monday digest, not live yet\nprompt: Write the Monday digest for {{date}}.\n" +
        'deliver:\n  - email: { to: [team@example.com], subject: "Monday digest" }\n',
    });
    const page = await signedIn();
    await page.goto(`${d.origin}/#/jobs/digest`);
    await page.locator("summary", { hasText: "Rehearse" }).click();
    await page.getByLabel(/^At /).fill("2026-12-07T09:00:00");
    await page.getByRole("button", { name: "Start the rehearsal" }).click();
    await page.waitForURL(/#\/rehearsals\/[^/]+$/);
    await page.getByRole("heading", { name: "What it would have sent" }).waitFor();

    expect(await page.locator(".captured .subject").textContent()).toBe("Monday digest");
    const mail = page.frameLocator("iframe.mail");
    expect(await mail.locator("strong").textContent()).toBe("120");
    expect(await mail.locator("h2").textContent()).toBe("Digest");
    expect(await page.locator("main pre.prompt").first().textContent()).toBe("## Digest\n\nSales were **120** in week 49.");
    const run = page.getByRole("link", { name: /^\d{8}T\d{6}Z-/ });
    expect(await run.getAttribute("href")).toMatch(/^#\/runs\/digest\//);
    await page.screenshot({ path: join(SCREENSHOTS, "rehearsal.png"), fullPage: true });

    // The rehearsal's run has its page, though the job's history does not list it.
    await run.click();
    await page.locator(".status", { hasText: "ok" }).first().waitFor();
    expect(await page.locator("main").textContent()).toContain("rehearsal");
  });

  it("replays a run and sees identical, then forks it with a new prompt and sees the diff", { timeout: TEST_MS }, async () => {
    const list = { name: "read_file", arguments: JSON.stringify({ path: "numbers.csv" }) };
    mock.on({ userMessage: "Report the numbers", sequenceIndex: 0 }, { toolCalls: [list] });
    mock.on({ userMessage: "Report the numbers", sequenceIndex: 1 }, { content: "Sales: 120 in week 49.\nA steady week." });
    mock.on({ userMessage: "Sum it up as a haiku", sequenceIndex: 0 }, { toolCalls: [list] });
    mock.on({ userMessage: "Sum it up as a haiku", sequenceIndex: 1 }, { content: "Sales: 120 in week 49.\nSteady as the tide." });
    await start({ report: "prompt: Report the numbers.\ntools: [read_file]\n" });
    const ran = await d.post("/api/jobs/report/run");
    const runId = ran.body.run_id as string;
    await vi.waitFor(async () => expect((await d.get(`/api/runs/${runId}`)).run.status).toBe("ok"), SLOW);
    const requests = mock.getRequests().length;

    const page = await signedIn();
    await page.goto(`${d.origin}/#/runs/report/${runId}`);
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    await page.waitForURL(/#\/rehearsals\/[^/]+$/);
    await page.locator(".verdict", { hasText: "identical" }).waitFor();
    expect(mock.getRequests()).toHaveLength(requests);
    await page.screenshot({ path: join(SCREENSHOTS, "replay.png"), fullPage: true });

    await page.goto(`${d.origin}/#/runs/report/${runId}`);
    await page.locator("summary", { hasText: "Fork" }).click();
    await page.getByLabel(/^Prompt /).fill("Sum it up as a haiku.");
    await page.getByRole("button", { name: "Fork", exact: true }).click();
    await page.waitForURL(/#\/rehearsals\/[^/]+$/);
    await page.locator(".verdict", { hasText: "differs" }).waitFor();
    expect(await page.locator(".diff .diff-del").allTextContents()).toContain("-A steady week.\n");
    expect(await page.locator(".diff .diff-add").allTextContents()).toContain("+Steady as the tide.\n");
    expect(await page.locator(".side-by-side").textContent()).toMatch(/Original.*read_file.*Fork.*read_file/);
    await page.screenshot({ path: join(SCREENSHOTS, "fork.png"), fullPage: true });
  });
});
