import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { closeServer, listenLoopback } from "../support/loopback.js";
import { runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startHeldLlm, type HeldLlm, type HeldRequest } from "../support/held-llm.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The console as its user sees it: Debian's Chromium, driven through playwright-core, against the
 * built daemon (dist/) started as `countd start` in a folder of its own, with an LLM on loopback
 * whose answers each test writes chunk by chunk, so the page is looked at after each one.
 */

const SCREENSHOTS = resolve(import.meta.dirname, "../../docs/screenshots");
/** For anything the page must come to show: a daemon, a browser and the test share two cores. */
const WAIT_MS = 30_000;
const TEST_MS = 120_000;

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

/** What an untrusted agent might answer, in three ways of running script: an HTML block, inline HTML and a Markdown link. */
const HOSTILE = [
  "Here you go.\n\n",
  "<script>window.pwned=1</script>\n\n",
  'Look: <img src=x onerror="window.pwned=2"> and ',
  "[click](javascript:window.pwned=3)",
  " to see. Done.",
];

describe.skipIf(!hasChromium)("the console in Chromium", () => {
  let dir: string;
  let llm: HeldLlm;
  let hooks: WebhookReceiver;
  let daemon: DaemonProcess;
  let env: Record<string, string>;
  let browser: Browser;
  let signInUrl: string;
  let origin: string;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), "countd-browser-"));
    llm = await startHeldLlm();
    // The first delivery is refused for good (400): it goes dead until someone retries it.
    hooks = await startWebhookReceiver({ steps: [400] });
    await mkdir(join(dir, "jobs"));
    // A price of its own for the model, so that the costs shown are the test's, not the bundled table's.
    await writeFile(
      join(dir, "countd.yaml"),
      // The heartbeat with no HEARTBEAT.md has nothing to say: listed as a job, it never asks the LLM here.
      "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\nprices:\n  gpt-4o-mini: { input: 0.15, cached_input: 0.075, output: 0.6 }\n" +
        "heartbeat:\n  enabled: true\n  every: 1h\n  timezone: Asia/Tokyo\n  deliver:\n    - email: { to: [me@example.com] }\n",
    );
    const jobs: Record<string, string> = {
      report: "description: The weekly numbers\nprompt: Write the weekly report.\ntools: [list_dir]\n",
      hostile: "prompt: Answer the hostile question.\n",
      slow: "prompt: Think slowly about it.\n",
      notify: `prompt: Send the notification.\ndeliver:\n  - webhook:\n      url: ${hooks.url}\n`,
      morning: 'description: Good morning, Tokyo\nschedule: "0 9 * * *"\ntimezone: Asia/Tokyo\nprompt: Say good morning.\n',
      history: "description: Ran twelve days on its own\nprompt: Tell the history.\n",
      broken: "prompt: Never runs.\nschedule: every monday\n",
    };
    for (const [name, yaml] of Object.entries(jobs)) await writeFile(join(dir, "jobs", `${name}.yaml`), yaml);
    await seedHistory(join(dir, "state"));
    // A fixed free port, so the daemon restarted in the last test serves the page at the same address.
    env = { OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: "sk-browser-test-key", COUNTD_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}` };
    daemon = await startDaemon();
    signInUrl = await consoleAddress();
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

  async function startDaemon(): Promise<DaemonProcess> {
    const started = spawnDaemon(dir, env);
    await vi.waitFor(() => expect(started.output()).toContain("console listening"), { timeout: WAIT_MS, interval: 100 });
    return started;
  }

  /** The address `countd console` prints, as its user would copy it. */
  async function consoleAddress(): Promise<string> {
    const printed = await runCountd(["console"], { cwd: dir, env });
    expect(printed).toMatchObject({ code: 0, stderr: "" });
    expect(printed.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=\S+\n$/);
    return printed.stdout.trim();
  }

  /**
   * A fresh browser profile at 1280x800. It records every Content-Security-Policy violation: a
   * page that tried to run injected script would show one even though the policy stopped it.
   */
  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    context.setDefaultTimeout(WAIT_MS);
    await context.addInitScript(() => {
      const w = window as unknown as { violations: string[] };
      w.violations = [];
      document.addEventListener("securitypolicyviolation", (event) =>
        w.violations.push(`${event.violatedDirective}: ${event.sample || event.blockedURI}`),
      );
    });
    return context.newPage();
  }

  async function signedIn(): Promise<Page> {
    const page = await newPage();
    await page.goto(signInUrl);
    await page.locator("h1", { hasText: "Overview" }).waitFor();
    return page;
  }

  const heading = (page: Page) => page.locator("main h1");
  const text = async (page: Page, selector: string) => (await page.locator(selector).textContent()) ?? "";

  /** Presses Run now on the job's page and follows it to the run's page; the LLM's request for it is taken. */
  async function runNow(page: Page, job: string, prompt: string): Promise<{ runId: string; request: HeldRequest }> {
    await page.goto(`${origin}/#/jobs/${job}`);
    await page.getByRole("button", { name: "Run now" }).click();
    await page.waitForURL(new RegExp(`#/runs/${job}/[^/]+$`));
    const runId = decodeURIComponent(new URL(page.url()).hash.split("/").at(-1)!);
    await page.locator(".live-badge").waitFor();
    return { runId, request: await llm.take(prompt) };
  }

  /** The element comes to hold exactly this text: what the agent wrote so far, markup included, as characters. */
  async function expectShown(element: Locator, expected: string): Promise<void> {
    await expect.poll(() => element.textContent(), { timeout: WAIT_MS, interval: 50 }).toBe(expected);
  }

  /** Nothing the agent wrote became markup that runs: no script, no handler, no javascript: link, no CSP violation. */
  async function expectInert(page: Page): Promise<void> {
    const found = await page.evaluate(() => ({
      pwned: (window as unknown as { pwned?: unknown }).pwned,
      scripts: [...document.querySelectorAll("script")].filter((script) => !script.src.endsWith("/assets/app.js")).length,
      images: document.querySelectorAll("main img").length,
      handlers: [...document.querySelectorAll("*")].filter((element) =>
        [...element.attributes].some((attribute) => attribute.name.startsWith("on")),
      ).length,
      javascriptLinks: [...document.querySelectorAll("[href], [src]")].filter((element) =>
        /^\s*javascript:/i.test(element.getAttribute("href") ?? element.getAttribute("src") ?? ""),
      ).length,
      violations: (window as unknown as { violations: string[] }).violations,
    }));
    expect(found).toEqual({ pwned: undefined, scripts: 0, images: 0, handlers: 0, javascriptLinks: 0, violations: [] });
  }

  it(
    "signs in with the address countd console prints, keeps the token out of the address bar, and lists the jobs with an invalid file's problem",
    { timeout: TEST_MS },
    async () => {
      const stranger = await newPage();
      await stranger.goto(`${origin}/`);
      await stranger.locator("h1", { hasText: "Sign in" }).waitFor();
      expect(await text(stranger, "main")).toContain("countd console");
      // An address with a wrong token: the same screen saying so, and the token gone from the address bar.
      await stranger.goto(`${origin}/?token=not-the-token`);
      await stranger.locator("main", { hasText: "not the console's token" }).waitFor();
      expect(stranger.url()).toBe(`${origin}/`);

      const page = await newPage();
      await page.goto(signInUrl);
      await heading(page).filter({ hasText: "Overview" }).waitFor();
      expect(page.url()).toBe(`${origin}/`);
      expect(await page.evaluate(() => document.cookie)).toBe("");
      expect(await page.title()).toBe("Overview · countd");

      await page.locator("table.jobs").waitFor();
      const row = (name: string) => page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name, exact: true }) });
      expect(await row("report").textContent()).toContain("manual");
      const morning = (await row("morning").textContent()) ?? "";
      expect(morning).toContain("cron 0 9 * * *");
      expect(morning).toContain("Asia/Tokyo");
      expect(morning).toMatch(/\d{4}-\d{2}-\d{2} 09:00 \+09:00/);
      const broken = (await row("broken").textContent()) ?? "";
      expect(broken).toContain("invalid");
      // Not armed: no "never" beside its spend, as if it were waiting for its first fire.
      expect(broken).toMatch(/not loaded: schedule: /);
      expect(broken).not.toContain("never");
      expect(await text(page, "tr.problems-row")).toMatch(/jobs\/broken\.yaml is invalid[\s\S]*every monday/);
      // The heartbeat is a job like the others: listed with its next check-in, and its page answers.
      const heartbeat = (await row("@heartbeat").textContent()) ?? "";
      expect(heartbeat).toContain("every 1h");
      expect(heartbeat).toMatch(/\d{4}-\d{2}-\d{2} \d{2}:\d{2} \+09:00/);
      expect(await text(page, ".tiles")).toMatch(/Jobs7 loaded, 1 invalid/);
      await page.locator(".connection", { hasText: "live" }).waitFor();

      // The keyboard alone: the skip link comes first, then g b and g o move between screens.
      await page.keyboard.press("Tab");
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
      await page.keyboard.press("Enter");
      expect(await page.evaluate(() => document.activeElement?.id)).toBe("main");
      await page.keyboard.press("g");
      await page.keyboard.press("b");
      await heading(page).filter({ hasText: "Outbox" }).waitFor();
      await page.keyboard.press("g");
      await page.keyboard.press("o");
      await heading(page).filter({ hasText: "Overview" }).waitFor();
      await expectInert(page);
      await page.getByRole("link", { name: "@heartbeat", exact: true }).click();
      await heading(page).filter({ hasText: "@heartbeat" }).waitFor();
      expect(await text(page, "main")).not.toContain("no job named");
    },
  );

  it("keeps a session id in its cookie, not the token, and signing out ends it on the daemon", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: `countd_console_${new URL(origin).port}`, httpOnly: true, sameSite: "Strict", path: "/" });
    expect(signInUrl).not.toContain(cookie!.value);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.locator("h1", { hasText: "Sign in" }).waitFor();
    // The cookie a browser kept, or another local service was sent, opens nothing now.
    const stale = await fetch(`${origin}/api/status`, { headers: { cookie: `${cookie!.name}=${cookie!.value}` } });
    expect(stale.status).toBe(401);
  });

  it(
    "pages through a job's older runs and charts their duration, tokens and cost, shows a run stopped by its budget as failed with why, and the overview charts runs per day by status",
    { timeout: TEST_MS },
    async () => {
      const page = await signedIn();
      const legend = page.locator("figure", { has: page.locator("figcaption", { hasText: "Runs per day" }) }).locator(".u-legend");
      await legend.waitFor();
      for (const status of ["ok", "error", "budget", "timeout"]) expect(await legend.textContent()).toContain(status);

      await page.getByRole("link", { name: "history", exact: true }).click();
      const rows = page.locator("table.runs tbody tr");
      await expect.poll(() => rows.count(), { timeout: WAIT_MS }).toBe(50);
      expect(await rows.first().textContent()).toContain(SEEDED.at(-1)!.id);
      await page.getByRole("button", { name: "Older runs" }).click();
      await expect.poll(() => rows.count(), { timeout: WAIT_MS }).toBe(SEEDED.length);
      expect(await rows.last().textContent()).toContain(SEEDED[0]!.id);
      expect(await rows.allTextContents()).toEqual([...SEEDED].reverse().map((run) => expect.stringContaining(run.id)));
      expect(await page.getByRole("button", { name: "Older runs" }).count()).toBe(0);
      expect(await rows.filter({ hasText: "timeout" }).count()).toBe(SEEDED.filter((run) => run.status === "timeout").length);

      const charts = page.locator("figure .chart");
      const tokens = SEEDED.map((run) => run.usage.inputTokens + run.usage.outputTokens);
      const costs = SEEDED.map((run) => run.cost!);
      expect(await charts.evaluateAll((boxes) => boxes.map((box) => box.getAttribute("aria-label")))).toEqual([
        "Duration of the last 60 finished runs: from 20 s to 50 s",
        `Tokens of the last 60 finished runs: from ${Math.min(...tokens).toLocaleString("en-US")} to ${Math.max(...tokens).toLocaleString("en-US")}`,
        `Cost of the last 60 finished runs: from ${cents(Math.min(...costs))} to ${cents(Math.max(...costs))}`,
      ]);
      expect(await page.locator("figure .chart canvas").count()).toBe(3);

      // A run its budget stopped: in the history with its cost and why, and on its page as a failure.
      const stopped = SEEDED.find((run) => run.status === "budget")!;
      const row = rows.filter({ hasText: stopped.id });
      expect(await row.textContent()).toContain(`budget${stopped.error}`);
      expect(await row.locator("td").last().textContent()).toBe(cents(stopped.cost!));
      await row.getByRole("link", { name: stopped.id }).click();
      await page.locator(".facts .status-budget", { hasText: "budget" }).waitFor();
      expect(await text(page, ".notice-error")).toBe(stopped.error);
      expect(await text(page, ".facts")).toContain(`Cost${cents(stopped.cost!)}Modelgpt-4o-mini`);
    },
  );

  it(
    "Run now streams the answer in as it is written and the tool call as it happens, then shows the transcript",
    { timeout: TEST_MS },
    async () => {
      const page = await signedIn();
      const first = await runNow(page, "report", "weekly report");
      await first.request.toolCall("call_1", "list_dir", { path: "." });

      const tool = page.locator(".step-tool").first();
      await tool.locator("summary", { hasText: "list_dir" }).waitFor();
      const answer = await llm.take("weekly report");
      await tool.locator("summary").click();
      await tool.locator("pre").nth(1).filter({ hasText: "list_dir" }).waitFor();
      expect(await tool.locator("pre").first().textContent()).toBe('{\n  "path": "."\n}');

      const chunks = [
        "## Weekly report\n\n",
        "Revenue is **up 4 %** this week.\n\n",
        "- 12 orders shipped\n",
        "- 3 orders waiting for stock\n\n",
        "Nothing else to report.",
      ];
      let sent = "";
      for (const [i, chunk] of chunks.entries()) {
        await answer.text(chunk);
        sent += chunk;
        // Each chunk on the page before the next is written: the answer is seen growing, as plain text.
        await expectShown(page.locator(".answer.live"), sent);
        if (i === 2) await page.screenshot({ path: join(SCREENSHOTS, "console-live-run.png") });
      }
      expect(await page.locator(".answer.md").count()).toBe(0);
      // 600 of the input read from the prompt cache (held-llm passes the usage on as given).
      await answer.end({ prompt_tokens: 900, completion_tokens: 40, prompt_tokens_details: { cached_tokens: 600 } } as {
        prompt_tokens: number;
        completion_tokens: number;
      });

      await page.locator(".answer.md strong", { hasText: "up 4 %" }).waitFor();
      expect(await page.locator(".live-badge").count()).toBe(0);
      expect(await text(page, ".answer.md h2")).toBe("Weekly report");
      expect(await page.locator(".answer.md li").allTextContents()).toEqual(["12 orders shipped", "3 orders waiting for stock"]);
      const facts = await text(page, ".facts");
      expect(facts).toContain("ok");
      expect(facts).toContain("manual");
      expect(await page.locator(".step-call .call-label").allTextContents()).toEqual(["Call 1", "Call 2"]);
      // (120 × $0.15 + 30 × $0.60) and (300 × $0.15 + 600 × $0.075 + 40 × $0.60) per million tokens.
      expect(await page.locator(".step-call .muted").allTextContents()).toEqual([
        expect.stringMatching(/gpt-4o-mini · 120 in \(0 cached\), 30 out · \$0\.000036 · [^·]+ · tool_calls/),
        expect.stringMatching(/gpt-4o-mini · 900 in \(600 cached\), 40 out · \$0\.000114 · [^·]+ · stop/),
      ]);
      expect(facts).toContain("Tokens1,090 1,020 in (600 cached), 70 out");
      expect(facts).toContain("Cost$0.00015Modelgpt-4o-mini");
      await page.locator(".step-tool summary").click();
      await page.locator(".step-tool pre").nth(1).filter({ hasText: "list_dir" }).waitFor();
      await page.screenshot({ path: join(SCREENSHOTS, "console-transcript.png") });

      // The job's history has the run, by reason and with its tokens, the cached ones and its cost.
      await page.getByRole("link", { name: "report", exact: true }).click();
      const run = page.locator("table.runs tbody tr", { hasText: first.runId });
      await run.waitFor();
      expect(await run.textContent()).toMatch(/okmanual.*1,090600 cached\$0\.00015$/);
      // The overview adds it to what the job spent today.
      await page.getByRole("link", { name: "Overview" }).first().click();
      const today = page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name: "report", exact: true }) });
      await expect.poll(() => today.locator("td.num").textContent(), { timeout: WAIT_MS }).toBe("$0.000151,090 tokens");
      // The history's last seeded runs may have started today too.
      const midnight = new Date();
      midnight.setHours(0, 0, 0, 0);
      const seededToday = SEEDED.filter((seeded) => Date.parse(seeded.startedAt) >= midnight.getTime()).reduce(
        (sum, seeded) => sum + seeded.cost!,
        0,
      );
      expect(await text(page, ".tiles")).toContain(`Spent today${cents(seededToday + 0.00015)}`);
    },
  );

  it(
    "renders an agent's script, image handler and javascript: link inert, while it streams and in the transcript",
    { timeout: TEST_MS },
    async () => {
      const page = await signedIn();
      const { runId, request } = await runNow(page, "hostile", "hostile question");
      // The overview streams the same answer beside it.
      const overview = await page.context().newPage();
      await overview.goto(`${origin}/`);
      await overview.locator(".live-run", { hasText: runId }).waitFor();

      let sent = "";
      for (const chunk of HOSTILE) {
        await request.text(chunk);
        sent += chunk;
        await expectShown(page.locator(".answer.live"), sent);
        await expectShown(overview.locator(".live-run .answer"), sent);
        await expectInert(page);
        await expectInert(overview);
      }
      await request.end();

      await page.locator(".answer.md").waitFor();
      await expectInert(page);
      const shown = await text(page, ".answer.md");
      expect(shown).toContain("Here you go.");
      expect(shown).toContain("Done.");
      expect(shown).not.toContain("pwned=1");
      expect(shown).toContain("click");
      const addresses = await page.locator(".answer.md a").evaluateAll((links) => links.map((link) => link.getAttribute("href")));
      expect(addresses.filter((address) => address !== null && !/^https?:/.test(address))).toEqual([]);
      await overview.locator(".live-runs .live-run", { hasText: runId }).waitFor({ state: "detached" });
      await expectInert(overview);
    },
  );

  it("pauses and resumes a job, and every job with the kill switch, and shows it everywhere", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    await page.goto(`${origin}/#/jobs/morning`);
    await page.getByRole("button", { name: "Pause" }).click();
    await page.locator(".badges .badge", { hasText: "paused" }).waitFor();
    await page.getByRole("button", { name: "Resume" }).waitFor();

    // Paused is the daemon's state, not the page's: a reload and the overview show it too.
    await page.reload();
    await page.locator(".badges .badge", { hasText: "paused" }).waitFor();
    await page.getByRole("link", { name: "Overview" }).first().click();
    const morning = page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name: "morning", exact: true }) });
    await morning.locator(".badge", { hasText: "paused" }).waitFor();
    expect(await text(page, ".tiles")).toContain("1 paused");

    await page.goto(`${origin}/#/jobs/morning`);
    await page.getByRole("button", { name: "Resume" }).click();
    await page.getByRole("button", { name: "Pause" }).waitFor();
    expect(await page.locator(".badges .badge", { hasText: "paused" }).count()).toBe(0);

    await page.goto(`${origin}/`);
    await page.getByRole("button", { name: "Pause all" }).click();
    await page.locator(".notice", { hasText: "All jobs are paused" }).waitFor();
    await page.getByRole("button", { name: "Resume all" }).waitFor();
    // Every loaded job, the heartbeat among them.
    expect(await page.locator("table.jobs .badge", { hasText: "paused" }).count()).toBe(7);
    await page.getByRole("button", { name: "Resume all" }).click();
    await page.getByRole("button", { name: "Pause all" }).waitFor();
    await expect.poll(() => page.locator("table.jobs .badge", { hasText: "paused" }).count(), { timeout: WAIT_MS }).toBe(0);
    expect(await page.locator(".notice", { hasText: "All jobs are paused" }).count()).toBe(0);
  });

  it("retries a dead delivery from the outbox, and the run then shows it delivered", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    const { runId, request } = await runNow(page, "notify", "notification");
    await request.text("All systems normal.");
    await request.end();
    await hooks.waitFor(1);

    const delivery = page.locator("section", { has: page.locator("h2", { hasText: "Deliveries" }) }).locator("tbody tr");
    await delivery.filter({ hasText: "dead" }).waitFor();
    expect(await delivery.textContent()).toContain("answered HTTP 400");
    await page.getByRole("link", { name: "Retry it in the outbox" }).click();

    await heading(page).filter({ hasText: "Outbox" }).waitFor();
    const dead = page.locator("section", { has: page.locator("h2", { hasText: "Dead" }) });
    const entry = dead.locator("tbody tr", { hasText: runId });
    expect(await entry.textContent()).toMatch(/notify.*webhook.*dead.*answered HTTP 400/);
    await entry.getByRole("button", { name: /^Retry/ }).click();
    await hooks.waitFor(2);
    // The delivery's live message takes it off the list, with no reload by the user.
    await entry.waitFor({ state: "detached" });
    await dead.getByText("No dead delivery.").waitFor();

    await page.goBack();
    await heading(page).filter({ hasText: runId }).waitFor();
    await delivery.filter({ hasText: "delivered" }).waitFor();
  });

  it("purges the dead deliveries from the outbox, once asked to confirm", { timeout: TEST_MS }, async () => {
    hooks.script(400);
    const page = await signedIn();
    const { runId, request } = await runNow(page, "notify", "notification");
    await request.text("Disk almost full.");
    await request.end();
    const delivery = page.locator("section", { has: page.locator("h2", { hasText: "Deliveries" }) }).locator("tbody tr");
    await delivery.filter({ hasText: "dead" }).waitFor();

    await page.goto(`${origin}/#/outbox`);
    const dead = page.locator("section", { has: page.locator("h2", { hasText: "Dead" }) });
    await dead.locator("tbody tr", { hasText: runId }).waitFor();
    page.once("dialog", (dialog) => void dialog.accept());
    await page.getByRole("button", { name: "Purge dead deliveries" }).click();
    await dead.getByText("No dead delivery.").waitFor();
    await page.locator(".notice", { hasText: "1 dead delivery removed." }).waitFor();
    const listed = await runCountd(["outbox", "--json"], { cwd: dir, env });
    expect(listed.stdout).not.toContain(runId);
  });

  it("cancels a run whose answer is still coming, after watching it on the overview", { timeout: TEST_MS }, async () => {
    const page = await signedIn();
    const { runId, request } = await runNow(page, "slow", "Think slowly");
    await request.text("Let me think about this step by step. ");
    await page.waitForFunction(() => document.querySelector(".answer.live")?.textContent?.includes("step by step"));

    await page.getByRole("link", { name: "Overview" }).first().click();
    const live = page.locator(".live-run", { hasText: runId });
    await live.locator(".answer", { hasText: "step by step" }).waitFor();
    await request.text("First, the orders of the week: 12 shipped, 3 waiting for stock. Then the returns…");
    await live.locator(".answer", { hasText: "waiting for stock" }).waitFor();
    expect(await text(page, ".tiles")).toMatch(/Running \/ queued1 \/ 0/);
    await page.screenshot({ path: join(SCREENSHOTS, "console-overview.png") });

    await live.getByRole("link", { name: runId }).click();
    await page.locator(".answer.live", { hasText: "waiting for stock" }).waitFor();
    await page.getByRole("button", { name: "Cancel run" }).click();
    await request.hungUp;
    await page.locator(".facts .status", { hasText: "cancelled" }).waitFor();
    expect(await text(page, "main")).toContain("cancelled from the console");
    expect(await page.getByRole("button", { name: "Cancel run" }).count()).toBe(0);
  });

  it("shows every time with its offset, a job's in the job's zone, whatever zone the browser is in", { timeout: TEST_MS }, async () => {
    // A browser in Los Angeles: no time on the page may be read on its clock without saying so.
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: "America/Los_Angeles" });
    contexts.push(context);
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    await page.goto(signInUrl);
    await page.locator(".daemon", { hasText: "started" }).waitFor();
    // The daemon's start belongs to no job: countd.yaml's zone, with its offset.
    expect(await text(page, ".daemon")).toMatch(/started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d,/);

    await page.goto(`${origin}/#/jobs/morning`);
    await heading(page).filter({ hasText: "morning" }).waitFor();
    expect(await page.locator("dd time").first().textContent()).toMatch(/^\d{4}-\d\d-\d\d 09:00 \+09:00$/);

    await page.goto(`${origin}/#/jobs/history`);
    const started = page.locator("table.runs tbody tr").first().locator("td time").nth(1);
    await started.waitFor();
    expect(await started.textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d$/);
  });

  it(
    "says it is reconnecting while the daemon is away; once it is back, asks to sign in again, then is live",
    { timeout: TEST_MS },
    async () => {
      const page = await signedIn();
      await page.locator(".connection", { hasText: "live" }).waitFor();
      const before = await text(page, ".daemon");
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      await page.locator(".connection", { hasText: "reconnecting" }).waitFor();

      // Sessions live in the daemon's memory: the new daemon knows none, and the page says how to sign in.
      daemon = await startDaemon();
      await page.locator("main", { hasText: "the daemon restarts" }).waitFor();
      expect(await text(page, "main")).toContain("countd console");
      await page.goto(signInUrl);
      await page.locator(".connection", { hasText: "live" }).waitFor();
      // What the overview shows is the new daemon's.
      await expect.poll(() => text(page, ".daemon"), { timeout: WAIT_MS }).toContain(`pid ${daemon.child.pid}`);
      expect(before).not.toContain(`pid ${daemon.child.pid}`);
    },
  );
});

/** Sixty finished runs of the job "history" over the last twelve days, newest last, some failed. */
const SEEDED: RunRecord[] = Array.from({ length: 60 }, (_, i) => {
  const started = new Date(Date.now() - (60 - i) * 4.8 * 3_600_000);
  const status = i % 10 === 3 ? "error" : i % 15 === 7 ? "timeout" : i % 20 === 9 ? "budget" : "ok";
  const tokens = 1_500 + ((i * 37) % 900);
  const cost = (tokens * 2) / 1_000_000;
  return {
    id: `${started.toISOString().replace(/[-:]|\.\d+/g, "")}-${i.toString(16).padStart(4, "0")}`,
    job: "history",
    reason: i % 4 === 0 ? "manual" : "schedule",
    scheduledAt: started.toISOString(),
    startedAt: started.toISOString(),
    finishedAt: new Date(started.getTime() + 20_000 + (i % 7) * 5_000).toISOString(),
    status,
    iterations: 2,
    toolCalls: 1,
    usage: { inputTokens: tokens - 100, outputTokens: 100, cachedInputTokens: 0, cacheWriteTokens: 0 },
    cost,
    model: "gpt-4o-mini",
    ...(status === "error"
      ? { error: "the model answered 500" }
      : status === "timeout"
        ? { error: "timed out after 1 minute" }
        : status === "budget"
          ? { error: `the job's per-run budget of $0.0030 is spent: this run has cost $${cost.toFixed(4)}` }
          : {}),
    sessionId: `cron:history:${i}`,
  };
});

/** The history an earlier daemon left in the state directory, written as countd writes it. */
async function seedHistory(stateDir: string): Promise<void> {
  const state = await StateStore.open(stateDir);
  for (const run of SEEDED) await state.saveRun(run);
  await state.close();
}

/** USD as the page shows a cost under a dollar, in the browser's en-US. */
const cents = (usd: number) =>
  new Intl.NumberFormat("en-US", { style: "currency", currency: "USD", maximumSignificantDigits: 3 }).format(usd);

/** A port free on 127.0.0.1 now. */
async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listenLoopback(server);
  await closeServer(server);
  return port;
}
