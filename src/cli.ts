import { Command, Option } from "commander";
import { CancelToken } from "./agent/cancel.js";
import { ConfigError } from "./config/errors.js";
import { loadConfig } from "./config/load.js";
import { LLMError } from "./providers/errors.js";
import { openRuntime } from "./runtime.js";

/** Exit codes a service manager can act on: 78 (EX_CONFIG) tells systemd not to restart in a loop. */
const EXIT = { ok: 0, failure: 1, config: 78, interrupted: 130 } as const;

const program = new Command()
  .name("countd")
  .description("Runs LLM agent jobs unattended: scheduled reports, file-triggered tasks, heartbeat check-ins.")
  .addOption(new Option("-c, --config <file>", "configuration file").default(undefined, "./countd.yaml"))
  .showHelpAfterError();

program
  .command("ask")
  .description("Ask the agent once and stream its answer to stdout; tool calls are reported on stderr.")
  .argument("<message>", "what to ask")
  .option("-s, --session <id>", "session to continue (history is kept per session)", "cli")
  .option("-i, --image <path>", "attach an image (png, jpeg, gif, webp); repeatable", collect, [] as string[])
  .option("-t, --tools <names>", "the only tools the agent may use, comma-separated (default: all enabled)", (v) =>
    v.split(",").map((name) => name.trim()).filter(Boolean),
  )
  .action(async (message: string, opts: { session: string; image: string[]; tools?: string[] }) => {
    const config = await loadConfig({ file: program.opts<{ config?: string }>().config });
    const runtime = await openRuntime(config);
    const loop = runtime.loop({ toolNames: opts.tools });
    for (const warning of runtime.warnings) process.stderr.write(`countd: warning: ${warning}\n`);
    const cancel = new CancelToken();
    const onSigint = () => {
      if (cancel.cancelled) process.exit(EXIT.interrupted);
      cancel.cancel("interrupted");
    };
    process.on("SIGINT", onSigint);
    runtime.events.on("tool.finished", (e) => {
      const status = e.error ? "error" : "ok";
      process.stderr.write(`[tool] ${e.name} ${shortArgs(argsByCall.get(e.callId))} ${status} ${Math.round(e.durationMs)}ms\n`);
    });
    const argsByCall = new Map<string, unknown>();
    runtime.events.on("tool.started", (e) => argsByCall.set(e.callId, e.arguments));

    let last = "";
    try {
      for await (const chunk of loop.processMessage(message, opts.session, {
        media: opts.image,
        channel: "cli",
        cancelToken: cancel,
      })) {
        process.stdout.write(chunk);
        last = chunk;
      }
      if (last && !last.endsWith("\n")) process.stdout.write("\n");
    } finally {
      process.off("SIGINT", onSigint);
      await runtime.close();
    }
    if (cancel.cancelled) process.exitCode = EXIT.interrupted;
  });

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function shortArgs(args: unknown): string {
  const text = typeof args === "string" ? args : JSON.stringify(args ?? {});
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** One readable line per failure: users of an unattended daemon read logs, not stack traces. */
function report(err: unknown): number {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    return EXIT.config;
  }
  if (err instanceof LLMError) {
    const tries = err.attempts > 1 ? ` after ${err.attempts} attempts` : "";
    process.stderr.write(`countd: LLM request failed${tries}: ${err.message}\n`);
    return EXIT.failure;
  }
  process.stderr.write(`countd: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT.failure;
}

program.parseAsync(process.argv).catch((err: unknown) => {
  process.exitCode = report(err);
});
