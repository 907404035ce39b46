/** What every command gets from countd's environment; anything else must be named in `exec.env`. */
const BASE_NAMES = ["PATH", "LANG", "LC_ALL", "TZ"];
const FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin";
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Throws when a configured name cannot be passed through as asked: HOME is always the workspace,
 * and a malformed name is more likely a typo than a wish.
 */
export function checkEnvNames(names: string[]): void {
  for (const name of names) {
    if (!ENV_NAME.test(name)) throw new Error(`exec.env: "${name}" is not an environment variable name`);
    if (name === "HOME") throw new Error('exec.env: "HOME" cannot be passed through; commands always get HOME set to the workspace');
  }
}

/**
 * The environment of a command, built from an allow-list so that provider keys, SMTP passwords and
 * webhook secrets in countd's own environment never reach it.
 */
export function childEnv(source: NodeJS.ProcessEnv, workspace: string, extraNames: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_NAMES, ...extraNames]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  env.HOME = workspace;
  return env;
}
