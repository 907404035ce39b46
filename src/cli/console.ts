import { loadConfig } from "../config/load.js";
import { readToken } from "../console/token.js";
import { findDaemon, readAddress } from "./control.js";
import { EXIT, NotRunning } from "./output.js";

/**
 * `countd console`: the address that signs a browser in to the running daemon's console, token
 * included, as one line on stdout for a person to open or a script to use.
 */
export async function consoleAddress(opts: { config?: string }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const stateDir = config.paths.state;
  const daemon = await findDaemon(stateDir);
  const url = daemon ? (await readAddress(stateDir))?.url : undefined;
  if (!url && !config.console.enabled)
    throw new NotRunning("the console is switched off (console.enabled: false): set it to true and restart countd to serve it");
  if (!daemon)
    throw new NotRunning(`countd is not running with the state directory ${stateDir}: the daemon serves the console (countd start)`);
  if (!url)
    throw new NotRunning(
      "the running daemon serves no console: it was started with console.enabled: false; restart it to serve the console",
    );
  const token = await readToken(stateDir);
  if (!token) throw new Error(`the console's token in ${stateDir} cannot be read: run countd as the daemon's user`);
  process.stdout.write(`${url}?token=${encodeURIComponent(token)}\n`);
  return EXIT.ok;
}
