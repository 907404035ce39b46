import { Command, Option } from "commander";
import { COST_GROUPS, jsonObject, nonEmpty, pastDuration, positiveInteger, type CostGroup } from "./cli/arguments.js";
import { EXIT, reportError } from "./cli/output.js";
import { VERSION } from "./package.js";
import { loadCredentials } from "./config/credentials.js";
import { hideStartEnvironment } from "./config/hidden-environ.js";

/**
 * A command's module, loaded when that command runs: each brings what it needs (the daemon, the
 * provider SDKs, the MCP SDK) and `countd --version` or `countd jobs` loads none of the others.
 */
function lazy<K extends string, M extends Record<K, (...args: never[]) => Promise<number>>>(load: () => Promise<M>, name: K): M[K] {
  return (async (...args: never[]) => (await load())[name](...args)) as M[K];
}

const ask = lazy(() => import("./cli/ask.js"), "ask");
const start = lazy(() => import("./cli/start.js"), "start");
const demo = lazy(() => import("./cli/demo.js"), "demo");
const changeOutbox = lazy(() => import("./cli/outbox.js"), "changeOutbox");
const listOutbox = lazy(() => import("./cli/outbox.js"), "listOutbox");
const listJobs = lazy(() => import("./cli/jobs.js"), "listJobs");
const history = lazy(() => import("./cli/reports.js"), "history");
const validate = lazy(() => import("./cli/validate.js"), "validate");
const runJob = lazy(() => import("./cli/run.js"), "runJob");
const testDelivery = lazy(() => import("./cli/test-delivery.js"), "testDelivery");
const status = lazy(() => import("./cli/status.js"), "status");
const consoleAddress = lazy(() => import("./cli/console.js"), "consoleAddress");
const cancelRun = lazy(() => import("./cli/steer.js"), "cancelRun");
const steerJobs = lazy(() => import("./cli/steer.js"), "steerJobs");
const showRun = lazy(() => import("./cli/show.js"), "showRun");
const follow = lazy(() => import("./cli/follow.js"), "follow");
const callMcpTool = lazy(() => import("./cli/mcp.js"), "callMcpTool");
const listMcp = lazy(() => import("./cli/mcp.js"), "listMcp");
const cost = lazy(() => import("./cli/cost.js"), "cost");
const rehearseJob = lazy(() => import("./cli/rehearse.js"), "rehearseJob");
const replayRun = lazy(() => import("./cli/rehearse.js"), "replayRun");
const listApprovals = lazy(() => import("./cli/approvals.js"), "listApprovals");
const answerApproval = lazy(() => import("./cli/approvals.js"), "answerApproval");

const program = new Command()
  .name("countd")
  .description("Runs LLM agent jobs unattended: scheduled reports, file-triggered tasks, heartbeat check-ins.")
  .version(VERSION, "-V, --version", "print countd's version")
  .addOption(new Option("-c, --config <file>", "configuration file").default(undefined, "./countd.yaml"))
  .showHelpAfterError()
  // Commander exits 1 on a usage error, which reads like a failed run; 2 says "called wrongly".
  // Commands added below inherit this.
  .exitOverride((err) => process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage));

const configFile = () => program.opts<{ config?: string }>().config;

/** Every command resolves to its exit code; failures become one readable line. */
const action =
  <A extends unknown[]>(command: (...args: A) => Promise<number>) =>
  async (...args: A) => {
    // First of all: a key countd was started with must not stay readable to every process of the user.
    const notHidden = hideStartEnvironment();
    if (notHidden)
      process.stderr.write(`countd: the environment countd started with stays readable in /proc/${process.pid}/environ: ${notHidden}\n`);
    process.exitCode = await loadCredentials(process.env)
      .then(() => command(...args))
      .catch(reportError);
  };

program
  .command("demo")
  .description("Show the whole path of a run with no API key and no mail server: an LLM simulator, the example jobs, .eml files.")
  .action(action(() => demo()));

program
  .command("start")
  .description("Run the daemon in the foreground: jobs fire on their schedules and file changes until SIGTERM.")
  .action(action(() => start({ config: configFile() })));

program
  .command("run")
  .description("Run one job now, streaming its answer (inside the daemon when it runs, else here); the exit code reflects its status.")
  .argument("<job>", "job name")
  .action(action((job: string) => runJob(job, { config: configFile() })));

program
  .command("rehearse")
  .description(
    "Try a job before it goes live: print its next five fires, rendered prompt, tools, size and price range, then run it against the real model with nothing sent (deliveries are written to <state_dir>/rehearsals/<id>/), tools on a copy of the workspace, and no history, state or alert changed; exit codes as countd run.",
  )
  .argument("<job>", "job name, or a job file's path (a draft not yet in jobs/)")
  .option("--jobs <dir>", "look the job up in this folder instead of jobs_dir")
  .option("--at <time>", "the instant the prompt sees: YYYY-MM-DDTHH:MM[:SS] with Z or ±HH:MM, else in the job's zone (default: now)")
  .option("--files <path...>", "the changed files a watch job's {{files}} lists")
  .option("--payload <file>", "the request body a webhook job's {{payload}} holds (- reads stdin)")
  .option("--no-run", "stop after the preview")
  .action(
    action((job: string, opts: { jobs?: string; at?: string; files?: string[]; payload?: string; run: boolean }) =>
      rehearseJob(job, { config: configFile(), ...opts }),
    ),
  );

program
  .command("replay")
  .description(
    "Run a past run again from its journal, with no LLM request and no tool run, and print `identical` or the differences in its answer and deliveries (rendered with today's templates into <state_dir>/rehearsals/<id>/; exit 1 when they differ). With --model, --prompt, --job or --system-prompt, a fork: the model is called anew, recorded tool results are reused for matching calls, and the answer, tool calls, tokens and price are printed beside the original's.",
  )
  .argument("<run-id>", "the run's id (countd history shows it)")
  .option("--of <job>", "the run's job, when the id is in several jobs")
  .option("--model <model>", "fork: call this model")
  .option("--prompt <file>", "fork: this prompt instead of the recorded one")
  .option("--job <file>", "fork: an edited job file (its prompt, tools and limits)")
  .option("--system-prompt <file>", "fork: this system prompt instead of the recorded one")
  .option("--recorded-only", "fork: refuse a tool call the run recorded no result for, instead of running it on a copy of the workspace")
  .option("--json", "print the report as JSON")
  .action(
    action(
      (
        runId: string,
        opts: { of?: string; model?: string; prompt?: string; job?: string; systemPrompt?: string; recordedOnly?: boolean; json?: boolean },
      ) => replayRun(runId, { config: configFile(), ...opts }),
    ),
  );

program
  .command("test-delivery")
  .description(
    "Send a test message, marked as one, to each of a job's delivery targets (deliver and on_failure; @heartbeat: heartbeat.deliver) and print what each answered; exits 1 when one failed. Sent from here, not through the daemon's outbox: it records no run and changes no state, so it is safe beside a running daemon.",
  )
  .argument("<job>", "job name, or @heartbeat")
  .action(action((job: string) => testDelivery(job, { config: configFile() })));

program
  .command("status")
  .description(
    "Say whether the daemon is running and what it is doing, how many jobs there are, and whether exec runs sandboxed (and if not, why); exits 3 when it is not running.",
  )
  .option("--json", "print the running daemon's status as JSON")
  .action(action((opts: { json?: boolean }) => status({ config: configFile(), ...opts })));

program
  .command("console")
  .description("Print the address that signs a browser in to the running daemon's console.")
  .action(action(() => consoleAddress({ config: configFile() })));

for (const change of ["pause", "resume"] as const) {
  program
    .command(change)
    .description(
      change === "pause"
        ? "Pause a job, or every job: its fires are recorded skipped until resumed; kept across restarts."
        : "Resume a paused job, or every job.",
    )
    .argument("[job]", "job name")
    .option("--all", change === "pause" ? "every job (the kill switch)" : "every job, and the switch that paused them all")
    .action(action((job: string | undefined, opts: { all?: boolean }) => steerJobs(change, job, { config: configFile(), ...opts })));
}

program
  .command("cancel")
  .description("Cancel a run in progress in the daemon.")
  .argument("<run-id>", "the run's id (countd status and countd history show it)")
  .option("--job <job>", "the run's job, when the id is in several jobs")
  .action(action((runId: string, opts: { job?: string }) => cancelRun(runId, { config: configFile(), ...opts })));

program
  .command("approvals")
  .description("List the tool calls waiting for a person's yes (approve: in a job file or countd.yaml), newest first.")
  .option("--all", "also the answered and expired ones, with who answered, when and why")
  .option("--json", "print them as a JSON array")
  .action(action((opts: { all?: boolean; json?: boolean }) => listApprovals({ config: configFile(), ...opts })));

for (const answer of ["approve", "deny"] as const) {
  program
    .command(answer)
    .description(
      answer === "approve"
        ? "Let a waiting tool call run (through the daemon when it runs, else kept for when it starts); exits 1 when the id is unknown, answered or expired."
        : "Refuse a waiting tool call: the agent is told it was denied and why, and the run goes on without it; exits 1 when the id is unknown, answered or expired.",
    )
    .argument("<id>", "the approval's id (countd approvals lists them)", nonEmpty)
    .option(
      answer === "approve" ? "--note <text>" : "--reason <text>",
      answer === "approve" ? "kept with the answer" : "told to the agent and kept with the answer",
      nonEmpty,
    )
    .action(
      action((id: string, opts: { note?: string; reason?: string }) =>
        answerApproval(answer, id, { config: configFile(), note: opts.note ?? opts.reason }),
      ),
    );
}

program
  .command("show")
  .description("Show a run's transcript: its prompt, each LLM call, text and tool call, and its deliveries.")
  .argument("<run-id>", "the run's id (countd history shows it)")
  .option("--job <job>", "the run's job, when the id is in several jobs")
  .option("--json", "print the run, its transcript and deliveries as JSON")
  .action(action((runId: string, opts: { job?: string; json?: boolean }) => showRun(runId, { config: configFile(), ...opts })));

program
  .command("follow")
  .description("Follow every run in the daemon (or one job's) live: starts, answers, tool calls, ends, deliveries, until Ctrl-C.")
  .argument("[job]", "only this job's runs")
  .action(action((job: string | undefined) => follow(job, { config: configFile() })));

program
  .command("jobs")
  .description("List the jobs with their trigger, timezone, next three fires and last status.")
  .option("--jobs <dir>", "list the job files of this folder (drafts) instead of countd.yaml's jobs folder")
  .action(action((opts: { jobs?: string }) => listJobs({ config: configFile(), ...opts })));

program
  .command("history")
  .description("Show recent runs with status, duration, tokens and cost.")
  .argument("[job]", "only this job's runs")
  .option("-n, --limit <n>", "how many runs", positiveInteger, 20)
  .option("--json", "print the run records as JSON")
  .action(action((job: string | undefined, opts: { limit: number; json?: boolean }) => history(job, { config: configFile(), ...opts })));

program
  .command("cost")
  .description(
    "Sum what the LLM calls cost (calls, tokens, USD) from the spend files (every node's calls, where daemons share a backend), by job, model or day, with a total; unpriced calls are counted apart.",
  )
  .addOption(
    new Option("--since <duration>", "how far back, like 7d, 24h or 30m").default(pastDuration("7d"), "7d").argParser(pastDuration),
  )
  .addOption(new Option("--by <group>", "group by").choices(COST_GROUPS).default("job"))
  .option("--json", "print the groups and the total as JSON")
  .action(
    action((opts: { since: number; by: CostGroup; json?: boolean }) =>
      cost({ config: configFile(), sinceMs: opts.since, by: opts.by, json: opts.json }),
    ),
  );

program
  .command("validate")
  .description("Check every job file; each problem is printed as path:line:col: message.")
  .option("--jobs <dir>", "jobs folder (default: jobs_dir of the configuration)")
  .action(action((opts: { jobs?: string }) => validate({ config: configFile(), ...opts })));

const outbox = program
  .command("outbox")
  .description("List pending and dead deliveries with their attempts and last error.")
  .option("--json", "print the entries as JSON")
  .action(action((opts: { json?: boolean }) => listOutbox({ config: configFile(), ...opts })));
outbox
  .command("retry")
  .description("Send a delivery again now: through the daemon when it runs, else from here.")
  .argument("[id]", "delivery id")
  .option("--dead", "every dead delivery")
  .action(action((id: string | undefined, opts: { dead?: boolean }) => changeOutbox("retry", { config: configFile(), id, ...opts })));
outbox
  .command("release")
  .description("Send a delivery held by on_verify_fail: hold: through the daemon when it runs, else from here.")
  .argument("<id>", "delivery id (countd outbox lists the held ones)")
  .action(action((id: string) => changeOutbox("release", { config: configFile(), id })));
outbox
  .command("purge")
  .description("Remove dead deliveries: through the daemon when it runs, else here.")
  .action(action(() => changeOutbox("purge", { config: configFile() })));

const mcp = program
  .command("mcp")
  .description(
    "Connect to each MCP server of the configuration and list its state (connected, or failed and why) and its tools; exits 1 when one failed.",
  )
  .action(action(() => listMcp({ config: configFile() })));
mcp
  .command("call")
  .description("Call one tool of an MCP server, for testing, and print its result.")
  .argument("<server>", "the server's name in mcp_servers")
  .argument("<tool>", "the tool's name on its server (countd mcp lists it)")
  .argument("[arguments]", "the arguments, a JSON object", jsonObject, {})
  .action(
    action((server: string, tool: string, args: Record<string, unknown>) => callMcpTool(server, tool, args, { config: configFile() })),
  );

program
  .command("ask")
  .description("Ask the agent once and stream its answer to stdout; tool calls are reported on stderr.")
  .argument("<message>", "what to ask", nonEmpty)
  .option("-s, --session <id>", "session to continue (history is kept per session)", "cli")
  .option(
    "-i, --image <path>",
    "attach an image (png, jpeg, gif, webp); repeatable",
    (v: string, all: string[]) => [...all, v],
    [] as string[],
  )
  .option("-t, --tools <names>", "the only tools the agent may use, comma-separated (default: all enabled)", (v) =>
    v
      .split(",")
      .map((name) => name.trim())
      .filter(Boolean),
  )
  .action(
    action((message: string, opts: { session: string; image: string[]; tools?: string[] }) =>
      ask(message, { config: configFile(), ...opts }),
    ),
  );

await program.parseAsync(process.argv);
