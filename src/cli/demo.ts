import { cp, mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import ms from "ms";
import { startDaemon } from "../daemon.js";
import { daemonLogger } from "../log.js";
import { EXIT } from "./output.js";
import { PACKAGE_DIR } from "../package.js";
import { history } from "./reports.js";

const say = (text: string) => process.stdout.write(`${text}\n`);

/**
 * `countd demo`: the whole path of a run, on a fresh clone with no API key and no mail server.
 * An LLM simulator (aimock, replies scripted in demo/fixtures.json) stands in for the model; the
 * example jobs run in a copy of the example workspace; mail is written as .eml files.
 */
export async function demo(): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), "countd-demo-"));
  await cp(join(PACKAGE_DIR, "jobs"), join(dir, "jobs"), { recursive: true });
  await cp(join(PACKAGE_DIR, "workspace"), join(dir, "workspace"), { recursive: true });
  // Loaded here, not at start-up: only the demo needs the simulator.
  const { LLMock } = await import("@copilotkit/aimock");
  const simulator = new LLMock({ port: 0, host: "127.0.0.1" });
  simulator.loadFixtureFile(join(PACKAGE_DIR, "demo", "fixtures.json"));
  await simulator.start();
  say(`LLM simulator: aimock at ${simulator.url}, answering from demo/fixtures.json (scripted replies, not a real model)`);
  say(`Demo folder:   ${dir}`);
  // The friendly lines are the demo's output; the daemon's log lines would interleave with them.
  const logFile = join(dir, "countd.log");
  say(`Daemon log:    ${logFile}`);

  await writeFile(
    join(dir, "countd.yaml"),
    // A free port for the console: the demo must not fail, or take 7420, beside a real daemon.
    `provider:\n  preset: custom\n  base_url: ${simulator.url}/v1\n  model: demo-simulator\n  attempts: 1\nconsole:\n  listen: "127.0.0.1:0"\n`,
  );
  const logger = daemonLogger({ level: "info", destination: logFile });
  const daemon = await startDaemon({ configFile: join(dir, "countd.yaml"), logger });
  try {
    say("\n1. daily-report: summarises workspace/notes/ through the list_dir and read_file tools");
    const report = await (await daemon.runner.request({ job: "daily-report", reason: "manual", scheduledAt: new Date() }).ended).record;
    say(`   run ${report.id}: ${report.status}, ${toolCalls(report.toolCalls)}`);

    say("\n2. inbox-orders: fires when a file lands in workspace/inbox/");
    await cp(join(PACKAGE_DIR, "demo", "order-1042.csv"), join(dir, "workspace", "inbox", "order-1042.csv"));
    say("   dropped order-1042.csv into the inbox; waiting for the watch trigger (2 s debounce)…");
    const inbox = await waitFor(async () => (await daemon.state.runs("inbox-orders")).find((run) => run.status !== "running"), 30_000);
    say(`   run ${inbox.id}: ${inbox.status}, ${toolCalls(inbox.toolCalls)}`);

    say("\n3. Deliveries (no smtp settings, so mail is written as .eml files):");
    await waitFor(async () => ((await daemon.outbox.list()).pending.length === 0 ? true : undefined), 30_000);
    const mailDir = join(dir, "state", "mail");
    for (const file of (await readdir(mailDir)).sort()) say(`   ${join(mailDir, file)}`);

    say("\n4. Run history (countd history):");
    await history(undefined, { config: join(dir, "countd.yaml"), limit: 10 });
    return EXIT.ok;
  } finally {
    await daemon.stop();
    await simulator.stop();
    // Also after a failure: the folder is what there is to look at.
    say(`\nThe demo folder is kept: ${dir} (jobs, workspace, state with the .eml files, countd.log); remove it when done.`);
  }
}

const toolCalls = (count: number): string => `${count} tool ${count === 1 ? "call" : "calls"}`;

async function waitFor<T>(check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`the demo waited ${ms(timeoutMs, { long: true })} and gave up`);
    await sleep(200);
  }
}
