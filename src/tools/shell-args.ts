/**
 * What a runner's arguments hold (code, a command to run, a path it writes or reads, or a reason
 * to refuse), and how the runners read a program's options from its words.
 */

export interface Word {
  /** Undefined when decided at run time. */
  value: string | undefined;
}

export type Finding<W extends Word> =
  | { kind: "code"; code: string; what: string }
  | { kind: "command"; argv: W[]; what: string }
  | { kind: "path"; path: string }
  | { kind: "refuse"; why: string };

/** The long option `--name`, also abbreviated to any unambiguous prefix of at least `min` characters (GNU getopt accepts those). */
export function longOption(arg: string, name: string, min: number): { value?: string } | undefined {
  const [written = "", ...rest] = arg.split("=");
  if (!written.startsWith("--") || written.length < Math.min(min, name.length) || !name.startsWith(written)) return undefined;
  return rest.length > 0 ? { value: rest.join("=") } : {};
}

/** Finds, in `args`, the value of each long option of `names` (with its minimal prefix) and short option of `shorts`. */
export function optionValues<W extends Word>(
  args: W[],
  longs: Record<string, number>,
  shorts: string[],
): { found: (string | undefined)[]; unknown: boolean } {
  const found: (string | undefined)[] = [];
  let unknown = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === undefined) {
      unknown = true;
      continue;
    }
    if (arg === "--") break;
    for (const [name, min] of Object.entries(longs)) {
      const hit = longOption(arg, name, min);
      if (hit) found.push(hit.value ?? args[++i]?.value);
    }
    if (/^-[^-]/.test(arg)) {
      for (const short of shorts) {
        const at = arg.indexOf(short, 1);
        if (at < 0) continue;
        found.push(arg.length > at + short.length ? arg.slice(at + short.length) : args[++i]?.value);
        break;
      }
    }
  }
  return { found, unknown };
}

/** Each value as code for the policy to check, or a refusal when it is decided at run time. */
export function codeOf<W extends Word>(values: (string | undefined)[], what: string, unknown: boolean): Finding<W>[] {
  return values.map((code) =>
    code === undefined || unknown
      ? { kind: "refuse", why: `${what} is decided at run time, so it cannot be checked` }
      : { kind: "code", code, what },
  );
}
