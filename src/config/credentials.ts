import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * systemd's `LoadCredential=NAME:/path` puts each secret in a file of `$CREDENTIALS_DIRECTORY`.
 * Each file whose name is a variable name becomes that variable for `${NAME}` references (one
 * trailing newline dropped), so keys need not be in the environment the service was started
 * with: that environment is blanked in `/proc/<pid>/environ` only once countd runs (hidden-environ.ts),
 * while a credential is never in it, not even in the parent that started countd. A variable the
 * environment already sets keeps its value.
 */
export async function loadCredentials(env: NodeJS.ProcessEnv): Promise<void> {
  const dir = env["CREDENTIALS_DIRECTORY"];
  if (!dir) return;
  let names: string[];
  try {
    names = (await readdir(dir)).filter((name) => VARIABLE_NAME.test(name)).sort();
  } catch (err) {
    throw new Error(`CREDENTIALS_DIRECTORY ${dir}: cannot list the credentials: ${(err as Error).message}`);
  }
  for (const name of names) {
    if (env[name] !== undefined) continue;
    const file = join(dir, name);
    const value = await readFile(file, "utf8").catch((err: unknown) => {
      throw new Error(`credential ${file}: cannot read it: ${(err as Error).message}`);
    });
    env[name] = value.replace(/\r?\n$/, "");
  }
}
