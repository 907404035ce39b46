import { CancelToken } from "../agent/cancel.js";
import { loadConfig } from "../config/load.js";
import { daemonLogger } from "../log.js";
import { openRuntime } from "../runtime.js";
import { withBackend } from "../backend/open.js";
import { EXIT, printToolCalls } from "./output.js";

export interface AskOptions {
  config?: string;
  session: string;
  image: string[];
  tools?: string[];
}

/** `countd ask`: one message, the answer streamed to stdout as it arrives. */
export async function ask(message: string, opts: AskOptions): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: ["provider", "mcp"] });
  // stdout carries the answer: what goes wrong on the way (an MCP server that does not start) goes to stderr.
  const runtime = await openRuntime(
    config,
    process.env,
    undefined,
    daemonLogger({ secrets: config.secrets, level: "warn", destination: 2 }),
  );
  const loop = runtime.loop({ toolNames: opts.tools });
  for (const warning of runtime.warnings) process.stderr.write(`countd: warning: ${warning}\n`);
  const cancel = new CancelToken();
  const onSigint = () => {
    if (cancel.cancelled) process.exit(EXIT.interrupted);
    cancel.cancel("interrupted");
  };
  process.on("SIGINT", onSigint);
  const stopPrinting = printToolCalls(runtime.events, (sessionId) => sessionId === opts.session);
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
    if (!cancel.cancelled) await withBackend(config, (backend) => backend.recordExchange(new Date()));
  } finally {
    process.off("SIGINT", onSigint);
    stopPrinting();
    await runtime.close();
  }
  return cancel.cancelled ? EXIT.interrupted : EXIT.ok;
}
