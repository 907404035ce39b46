import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page, type WebSocketRoute } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { closeServer, listenLoopback } from "../support/loopback.js";
import { runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startHeldLlm, type HeldLlm } from "../support/held-llm.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The console's live transcript while the page changes what it subscribes to, its charts of a
 * job with a single run, and how it names a watch job's trigger: Debian's Chromium against the
 * built daemon (dist/), with an LLM on loopback whose answers the test writes step by step.
 */

const WAIT_MS = 30_000;
const TEST_MS = 120_000;

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

describe.skipIf(!hasChromium)("the console's live transcript and charts in Chromium", () => {
  let dir: string;
  let llm: HeldLlm;
  let hooks: WebhookReceiver;
  let daemon: DaemonProcess;
  let browser: Browser;
  let signInUrl: string;
  let origin: string;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-browser-live-"));
    llm = await startHeldLlm();
    hooks = await startWebhookReceiver();
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "workspace", "inbox"), { recursive: true });
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    const jobs: Record<string, string> = {
      report: "prompt: Write the weekly report.\ntools: [list_dir]\n",
      once: "prompt: Ran once.\n",
      intake: 'prompt: Read the new files.\nwatch:\n  paths: ["inbox/*.csv"]\n',
      notify: `prompt: Send the notification.\ndeliver:\n  - webhook:\n      url: ${hooks.url}\n`,
    };
    for (const [name, yaml] of Object.entries(jobs)) await writeFile(join(dir, "jobs", `${name}.yaml`), yaml);
    const state = await StateStore.open(join(dir, "state"));
    await state.saveRun(ONCE);
    await state.close();
    const env = {
      OPENAI_BASE_URL: llm.baseURL,
      OPENAI_API_KEY: "sk-browser-test-key",
      COUNTD_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    };
    daemon = spawnDaemon(dir, env);
    await vi.waitFor(() => expect(daemon.output()).toContain("console listening"), { timeout: WAIT_MS, interval: 100 });
    const printed = await runCountd(["console"], { cwd: dir, env });
    signInUrl = printed.stdout.trim();
    origin = new URL(signInUrl).origin;
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  }, TEST_MS);

  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  afterAll(async () => {
    await browser?.close();
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill("SIGTERM");
      await daemon.exited;
    }
    await llm?.close();
    await hooks?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, TEST_MS);

  /** A signed-in page that records the text drawn on each canvas: the charts' axis labels are drawn, not written in the DOM. */
  async function signedIn(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    context.setDefaultTimeout(WAIT_MS);
    await context.addInitScript(() => {
      const drawn = new WeakMap<HTMLCanvasElement, string[]>();
      (window as unknown as { drawnText: (canvas: HTMLCanvasElement) => string[] }).drawnText = (canvas) => drawn.get(canvas) ?? [];
      const fillText = CanvasRenderingContext2D.prototype.fillText;
      CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
        if (!drawn.has(this.canvas)) drawn.set(this.canvas, []);
        drawn.get(this.canvas)!.push(String(text));
        return fillText.call(this, text, ...rest);
      };
    });
    const page = await context.newPage();
    await page.goto(signInUrl);
    await page.locator("main h1", { hasText: "Overview" }).waitFor();
    return page;
  }

  it("shows each step of a run once and in order when the run moves on while its page subscribes", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    // The run page's subscription is held on its way to the daemon until the run has taken a step
    // and the job page's subscription has brought that step to the browser: the overlap that
    // otherwise depends on how quickly the page moves from the job to its run.
    let toDaemon!: WebSocketRoute;
    let heldSubscription: string | undefined;
    const passed: Array<{ type: string }> = [];
    await page.routeWebSocket(/\/api\/ws$/, (ws) => {
      const server = ws.connectToServer();
      toDaemon = server;
      ws.onMessage((message) => {
        if (typeof message === "string" && message.includes('"run"')) heldSubscription = message;
        else server.send(message);
      });
      server.onMessage((message) => {
        passed.push(JSON.parse(String(message)) as { type: string });
        ws.send(message);
      });
    });
    // Loaded again: the page's WebSocket is opened through the route.
    await page.reload();
    await page.goto(`${origin}/#/jobs/report`);
    await page.locator(".connection", { hasText: "live" }).waitFor();
    await page.getByRole("button", { name: "Run now" }).click();
    await page.waitForURL(/#\/runs\/report\/[^/]+$/);
    await vi.waitFor(() => expect(heldSubscription).toBeDefined(), { timeout: WAIT_MS, interval: 20 });

    await (await llm.take("weekly report")).toolCall("call_1", "list_dir", { path: "." });
    const second = await llm.take("weekly report");
    await vi.waitFor(() => expect(passed.filter((m) => m.type === "iteration")).toHaveLength(2), { timeout: WAIT_MS, interval: 20 });
    toDaemon.send(heldSubscription!);
    // Every live message of the job page's subscription has reached the page; now the run's replay comes.
    await vi.waitFor(() => expect(passed.at(-1)?.type).toBe("live"), { timeout: WAIT_MS, interval: 20 });

    const steps = page.locator(".steps > li");
    const shown = () =>
      steps.evaluateAll((items) => items.map((item) => item.querySelector(".call-label, .tool-name")?.textContent ?? item.textContent));
    // The run is still in progress: its second call is held open.
    await page.locator(".live-badge").waitFor();
    await expect.poll(shown, { timeout: 5_000, interval: 50 }).toEqual(["Iteration 1", "list_dir", "Iteration 2"]);
    await second.text("Nothing to report.");
    await expect.poll(shown, { timeout: 5_000, interval: 50 }).toEqual(["Iteration 1", "list_dir", "Iteration 2", "Nothing to report."]);
    expect(await page.locator(".live-badge").count()).toBe(1);

    await second.end();
    await page.locator(".answer.md").waitFor();
    expect(await page.locator(".step-tool .tool-name").allTextContents()).toEqual(["list_dir"]);
  });

  it("labels the time axis of a job's charts with the day of its only run, not years", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    await page.goto(`${origin}/#/jobs/once`);
    const canvas = page.locator("figure .chart canvas").first();
    await canvas.waitFor();
    const labels = await canvas.evaluate((element) =>
      (window as unknown as { drawnText: (canvas: HTMLCanvasElement) => string[] }).drawnText(element as HTMLCanvasElement),
    );
    const years = labels.filter((label) => /^\d{4}$/.test(label));
    expect(years).toEqual([]);
    // The run's hour, as uPlot writes it in the browser's zone (12-hour clock): the axis spans hours around it.
    const started = new Date(ONCE.startedAt);
    const hour = `${started.getHours() % 12 || 12}${started.getHours() < 12 ? "am" : "pm"}`;
    expect(labels.join(" ")).toContain(hour);
  });

  it("shows how many attempts a delivered delivery took", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    await page.goto(`${origin}/#/jobs/notify`);
    await page.getByRole("button", { name: "Run now" }).click();
    await page.waitForURL(/#\/runs\/notify\/[^/]+$/);
    const request = await llm.take("notification");
    await request.text("All systems normal.");
    await request.end();
    await hooks.waitFor(1);
    const delivery = page.locator("section", { has: page.locator("h2", { hasText: "Deliveries" }) }).locator("tbody tr");
    await delivery.filter({ hasText: "delivered" }).waitFor();
    expect(await delivery.locator("td.num").textContent()).toBe("1");
  });

  it("names a watch job's globs in its trigger", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    const row = page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name: "intake", exact: true }) });
    await expect.poll(() => row.textContent(), { timeout: WAIT_MS }).toContain("watch inbox/*.csv");
    await page.goto(`${origin}/#/jobs/intake`);
    await page.locator("main", { hasText: "watch inbox/*.csv" }).waitFor();
  });
});

/** The job "once"'s only run, finished two hours ago. */
const ONCE: RunRecord = (() => {
  const started = new Date(Date.now() - 2 * 3_600_000);
  return {
    id: `${started.toISOString().replace(/[-:]|\.\d+/g, "")}-0001`,
    job: "once",
    reason: "manual",
    scheduledAt: started.toISOString(),
    startedAt: started.toISOString(),
    finishedAt: new Date(started.getTime() + 30_000).toISOString(),
    status: "ok",
    iterations: 1,
    toolCalls: 0,
    usage: { inputTokens: 900, outputTokens: 100, cachedInputTokens: 0, cacheWriteTokens: 0 },
    cost: 0.0004,
    model: "gpt-4o-mini",
    sessionId: "manual:once:1",
  };
})();

/** A port free on 127.0.0.1 now. */
async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listenLoopback(server);
  await closeServer(server);
  return port;
}
