/** A configuration the user must fix; the message holds every problem found, one per line. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(problems.join("\n"));
    this.problems = problems;
  }
}

/**
 * Something a setting names cannot serve (the console's port is taken, the shared backend's Redis
 * cannot be reached or is too old): one line for the user, exit 78 as for a configuration error.
 */
export class SettingUnusable extends Error {}
