import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApprovalDesk } from "../../src/approvals/desk.js";
import { FileApprovals } from "../../src/approvals/file-store.js";
import { approvalKey, callHash, newApprovalId } from "../../src/approvals/links.js";
import type { Approval, SuspendedRun } from "../../src/approvals/types.js";
import { loadConfig } from "../../src/config/load.js";
import { LiveHub } from "../../src/console/live.js";
import { Metrics } from "../../src/console/metrics.js";
import { Rehearsals } from "../../src/console/rehearsals.js";
import { startConsole, type ConsoleServer } from "../../src/console/server.js";
import { openCore } from "../../src/core.js";
import { CronTrigger } from "../../src/triggers/cron.js";
import { WebhookTrigger } from "../../src/triggers/webhook.js";
import { WebhookIds } from "../../src/store/webhook-ids.js";
import { captureLog } from "./log-capture.js";

/*
 * The console as the daemon serves it, with a real ApprovalDesk on the state directory's files
 * and a `resume` that records each approval it is handed: the console's side of approvals
 * without the agent loop that suspends runs.
 */

export interface ApprovalConsole {
  dir: string;
  desk: ApprovalDesk;
  /** The approvals handed to `resume`, in order. */
  resumed: Approval[];
  /** http://127.0.0.1:<port> */
  origin: string;
  token: string;
  /** Keeps a waiting approval (and its run) as a suspended run would; returns it. */
  ask(fields?: Partial<Approval>): Promise<Approval>;
  stop(): Promise<void>;
}

/** `now`: the desk's clock, to see links expire. */
export async function startApprovalConsole(opts: { now?: () => Date } = {}): Promise<ApprovalConsole> {
  const dir = await mkdtemp(join(tmpdir(), "countd-approvals-"));
  await mkdir(join(dir, "jobs"));
  await mkdir(join(dir, "workspace"));
  await writeFile(join(dir, "countd.yaml"), 'console:\n  listen: "127.0.0.1:0"\ntools:\n  exec:\n    sandbox: none\n');
  const env = { PATH: process.env["PATH"] ?? "", OPENAI_API_KEY: "sk-approvals-console" };
  const { log } = captureLog();
  const config = await loadConfig({ file: join(dir, "countd.yaml"), env });
  const core = await openCore("daemon", { config: () => config, env, log, concurrency: 1 });
  const { state, jobs, runner, outbox, ledger, backend } = core;
  await jobs.load();
  const events = core.runtime().events;
  const live = new LiveHub(events, () => core.runtime().redactor, { node: backend.node });
  const metrics = new Metrics({ events, outbox, jobs, state, node: backend.node });
  const resumed: Approval[] = [];
  const store = await FileApprovals.open(config.paths.state);
  const desk = new ApprovalDesk({
    store,
    key: await approvalKey(config.paths.state),
    resume: (approval) => resumed.push(approval),
    ...(opts.now ? { now: opts.now } : {}),
  });
  const server: ConsoleServer = await startConsole(
    {
      config: () => config,
      state,
      runner,
      jobs,
      outbox,
      cron: new CronTrigger({ fire: () => {}, state, log }),
      live,
      metrics,
      hooks: new WebhookTrigger({ job: (name) => jobs.get(name), runner, ids: await WebhookIds.open(config.paths.state), env, log }),
      ledger,
      redactor: () => core.runtime().redactor,
      startedAt: new Date(),
      version: "test",
      rehearsals: new Rehearsals(env, log),
      approvals: desk,
    },
    log,
  );
  const token = (await readFile(join(config.paths.state, "console.token"), "utf8")).trim();
  let asked = 0;
  return {
    dir,
    desk,
    resumed,
    origin: new URL(server.url!).origin,
    token,
    async ask(fields = {}) {
      asked++;
      const tool = fields.tool ?? "exec";
      const args = fields.arguments ?? { command: "git push origin main" };
      const askedAt = new Date(Date.now() - 60_000 + asked * 1000);
      const approval: Approval = {
        id: newApprovalId(),
        job: "release",
        run: `20260301T090000Z-${String(asked).padStart(4, "0")}`,
        tool,
        arguments: args,
        hash: callHash(tool, args),
        rule: 'exec: "git push *"',
        askedAt: askedAt.toISOString(),
        expiresAt: new Date(askedAt.getTime() + 4 * 3_600_000).toISOString(),
        onTimeout: "deny",
        reasoning: "The tests pass; pushing the release branch.",
        status: "waiting",
        ...fields,
      };
      const run: SuspendedRun = {
        job: approval.job,
        run: approval.run,
        startedAt: approval.askedAt,
        reason: "schedule",
        scheduledAt: approval.askedAt,
        clockAt: approval.askedAt,
        loop: {
          message: "Push the release.",
          said: "",
          rule: 'the command "git push origin main" matches "git push *"',
          messages: [],
          transcript: [],
          pending: [],
          iterations: 1,
          toolCalls: 0,
          usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0 },
          cost: 0,
          calls: [],
          activeMs: 1000,
        },
      };
      await store.add(approval, run);
      return approval;
    },
    async stop() {
      await server.close();
      await runner.shutdown(0);
      live.close();
      metrics.close();
      await core.close();
      await rm(dir, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}
