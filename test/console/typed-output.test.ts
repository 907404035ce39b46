import { chromium } from "playwright-core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, SLOW, startConsoleDaemon, writeJob } from "../support/console-daemon.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";

/*
 * A typed answer as the run API and the console's run page show it: the repair the model was
 * asked for among the steps, and the output itself.
 */

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

const JOB = `prompt: Count the open tickets.
tools: []
output:
  schema:
    type: object
    required: [open]
    properties: { open: { type: integer } }
`;

describe("a typed answer in the run API and the console", { timeout: 120_000 }, () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  afterEach(async () => {
    await daemons.cleanup();
  });

  it("GET /api/runs/:id has the output and the repair step, and the run page shows both", async () => {
    mock.onMessage("Count the open tickets", { content: '{"open": "three"}' });
    mock.onMessage("not valid against the required JSON Schema", { content: '{"open": 3}' });
    const dir = await consoleFolder();
    await writeJob(dir, "tickets", JOB);
    const d = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-typed-console" });
    daemons.started.push(d);

    const ran = await d.post("/api/jobs/tickets/run");
    const runId = ran.body.run_id as string;
    await vi.waitFor(async () => expect((await d.get(`/api/runs/${runId}`)).run.status).toBe("ok"), SLOW);
    const view = await d.get(`/api/runs/${runId}`);
    expect(view.transcript.output).toEqual({ open: 3 });
    expect(view.transcript.steps).toContainEqual({ kind: "repair", errors: ["at /open: must be integer"] });

    if (!hasChromium) return;
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(`${d.origin}/?token=${encodeURIComponent(d.token)}`);
      await page.locator("h1", { hasText: "Overview" }).waitFor();
      await page.goto(`${d.origin}/#/runs/tickets/${runId}`);
      await page.getByRole("heading", { name: "Output" }).waitFor();
      expect(JSON.parse((await page.locator("pre.output").textContent()) ?? "")).toEqual({ open: 3 });
      expect(await page.locator(".step", { hasText: "Repair asked" }).textContent()).toContain("at /open: must be integer");
    } finally {
      await browser.close();
    }
  });
});
