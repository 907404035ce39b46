import { loadConfig } from "../config/load.js";
import type { JobView, LiveMessage } from "../console/protocol.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { requireDaemon } from "./control.js";
import { costText, span, tokensText } from "../text.js";
import { EXIT, toolLine } from "./output.js";
import { inert } from "./transcript-format.js";

/**
 * `countd follow [job]`: every run's live stream (or one job's) until Ctrl-C: a line for each
 * run's start and end, each tool call and each delivery, and the answers as they are written,
 * every line led by its job's name. What runs now is shown from its start first.
 */
export async function follow(job: string | undefined, opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const daemon = await requireDaemon(config.paths.state, "countd follow");
  if (job !== undefined && job !== HEARTBEAT_JOB) {
    // A name mistyped would follow nothing, silently, until Ctrl-C.
    const { jobs } = await daemon.call<{ jobs: JobView[] }>("GET", "/api/jobs");
    if (!jobs.some((view) => view.name === job))
      throw new Error(`no job named "${job}" (jobs: ${jobs.map((view) => view.name).join(", ") || "none"})`);
  }
  const print = printer();
  const live = await daemon.live(job !== undefined ? { job } : {}, print);
  process.stderr.write(`countd: following ${job ?? "every job"} (Ctrl-C stops)\n`);
  let onSigint = () => {};
  const interrupted = new Promise<"interrupted">((resolve) => (onSigint = () => resolve("interrupted")));
  process.on("SIGINT", onSigint);
  try {
    const end = await Promise.race([interrupted, live.closed]);
    print.end();
    if (end === "interrupted") return EXIT.ok;
    process.stderr.write(`countd: the daemon closed the stream${end.reason ? ` (${end.reason})` : ""}\n`);
    return EXIT.notRunning;
  } finally {
    process.off("SIGINT", onSigint);
    live.close();
  }
}

/**
 * Writes messages as lines on stdout. Answer text comes in chunks: a line of it is led by its job's
 * name when it begins, and left open until it ends or another message needs a line of its own.
 */
function printer(): ((message: LiveMessage) => void) & { end(): void } {
  /** The run whose answer line is not ended yet. */
  let open: string | undefined;
  const args = new Map<string, unknown>();
  const endOpen = () => {
    if (open !== undefined) process.stdout.write("\n");
    open = undefined;
  };
  const line = (job: string | undefined, text: string) => {
    endOpen();
    process.stdout.write(`[${job ?? "countd"}] ${inert(text)}\n`);
  };
  const answer = (runId: string, job: string, content: string) => {
    if (open !== runId) endOpen();
    let text = "";
    for (const piece of inert(content).split(/(?<=\n)/)) {
      if (piece === "") continue;
      if (open === undefined) text += `[${job}] `;
      text += piece;
      open = piece.endsWith("\n") ? undefined : runId;
    }
    process.stdout.write(text);
  };
  const print = (message: LiveMessage) => {
    switch (message.type) {
      case "run_started":
        return line(
          message.job,
          `run ${message.run_id} started (${message.run.reason}${message.node !== undefined ? `, on ${message.node}` : ""})`,
        );
      case "stream":
        return answer(message.run_id, message.job, message.content);
      case "tool_start":
        args.set(message.call_id, message.arguments);
        return;
      case "tool_result":
        line(
          message.job,
          toolLine(message.name, args.get(message.call_id), Boolean(message.error), message.duration_ms) +
            (message.error ? `: ${message.error}` : ""),
        );
        args.delete(message.call_id);
        return;
      case "run_finished": {
        const { run } = message;
        const took = run.finishedAt ? `${span(Date.parse(run.finishedAt) - Date.parse(run.startedAt))}, ` : "";
        // A run that never started has no cost recorded: nothing is said of it.
        const cost = run.cost !== undefined ? `, ${costText(run.cost)}` : "";
        return line(
          message.job,
          `run ${message.run_id} ${message.status} (${took}tokens ${tokensText(message.usage)}${cost})${message.error ? `: ${message.error}` : ""}`,
        );
      }
      case "delivery": {
        const attempts = message.attempts > 0 ? ` (attempt ${message.attempts})` : "";
        return line(message.job, `delivery ${message.status}: ${message.to}${attempts}${message.error ? `: ${message.error}` : ""}`);
      }
    }
  };
  return Object.assign(print, { end: endOpen });
}
