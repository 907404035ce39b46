import { chromium, type Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, endedRun, startConsoleDaemon, writeJob } from "../support/console-daemon.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);
const WAIT_MS = 30_000;

/* The console's side of on_verify_fail: hold: the run page shows the failed check, the outbox page releases the delivery. */
describe.skipIf(!hasChromium)("a held delivery in the console", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let hook: WebhookReceiver | undefined;
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  }, WAIT_MS);
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    await daemons.cleanup();
    await hook?.close();
  });

  it("shows the failed check on the run's page, and the outbox's Release sends the delivery once", { timeout: 90_000 }, async () => {
    hook = await startWebhookReceiver();
    const dir = await consoleFolder();
    await writeJob(
      dir,
      "numbers",
      `prompt: Report the numbers.\ndeliver:\n  - webhook: { url: "${hook.url}" }\nverify:\n  - tools_called: [web_fetch]\non_verify_fail: hold\n`,
    );
    mock.onMessage("Report the numbers", { content: "The numbers are in." });
    const console = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-release-test" });
    daemons.started.push(console);
    const { body } = await console.post(`/api/jobs/numbers/run`);
    await endedRun(console, body.run_id, "numbers");

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    await page.goto(`${console.origin}/?token=${console.token}`);
    await page.locator("h1", { hasText: "Overview" }).waitFor();

    await page.goto(`${console.origin}/#/runs/numbers/${body.run_id}`);
    await page.locator(".step", { hasText: "Check 1 · tools_called" }).waitFor();
    expect(await page.locator(".step", { hasText: "Check 1" }).textContent()).toContain("failed: no successful call of web_fetch");
    // Its delivery waits for a person, not for a time: the run page says held, why, and where to release it.
    const delivery = page.locator("section", { has: page.locator("h2", { hasText: "Deliveries" }) }).locator("tbody tr");
    expect(await delivery.textContent()).toMatch(/held.*failed checks: tools_called web_fetch.*Release it in the outbox/);

    await page.goto(`${console.origin}/#/outbox`);
    const pending = page.locator("section", { has: page.locator("h2", { hasText: "Pending" }) });
    const entry = pending.locator("tbody tr", { hasText: body.run_id });
    expect(await entry.textContent()).toMatch(/held.*failed checks: tools_called web_fetch/);
    expect(hook.requests).toHaveLength(0);
    await entry.getByRole("button", { name: /^Release/ }).click();
    await hook.waitFor(1);
    await entry.waitFor({ state: "detached" });
    await pending.getByText("Nothing waiting to be sent.").waitFor();
    expect(hook.acknowledgedIds()).toHaveLength(1);
    await context.close();
  });
});
