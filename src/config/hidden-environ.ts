import { closeSync, openSync, readFileSync, writeSync } from "node:fs";

/** Ordinary variables that stay visible: they hold no secret, and a library may still point at their bytes. */
const KEPT =
  /^(PATH|HOME|USER|LOGNAME|SHELL|TERM|PWD|TMPDIR|TZ|LANG|LANGUAGE|LC_[A-Z_]+|NODE_[A-Z_]+|LD_[A-Z_]+|XDG_[A-Z_]+|INVOCATION_ID|JOURNAL_STREAM|NOTIFY_SOCKET|CREDENTIALS_DIRECTORY)$/;

/**
 * Blanks the environment countd started with in `/proc/<pid>/environ`, which any process of the
 * same user can read (a command run with `sandbox: none` too), so provider keys, `secrets:`,
 * `job_env` values and passwords placed in the environment stop showing there. That file is not
 * `process.env`: it reads the block of memory the kernel filled at exec, which setenv never
 * touches. So each variable outside KEPT is moved into memory of its own (unset and set again,
 * so `process.env` keeps it) and its bytes in that block are overwritten with zeros through
 * `/proc/self/mem`. Done in place, not by starting countd again without the variables: no second
 * process to pass signals and exit codes through, and no second start-up.
 * Returns why it could not, or undefined; without /proc there is no such file to hide from.
 */
export function hideStartEnvironment(env: NodeJS.ProcessEnv = process.env): string | undefined {
  let stat: string;
  let block: Buffer;
  try {
    stat = readFileSync("/proc/self/stat", "utf8");
    block = readFileSync("/proc/self/environ");
  } catch {
    return undefined;
  }
  // Fields 50 and 51 (env_start, env_end); the command name in field 2 may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const start = Number(fields[47]);
  if (!Number.isSafeInteger(start) || start <= 0 || Number(fields[48]) - start !== block.length) {
    return `/proc/self/stat gives no environment block matching /proc/self/environ (${block.length} bytes)`;
  }
  const blanks: { offset: number; length: number }[] = [];
  for (let offset = 0; offset < block.length;) {
    const endOfEntry = block.indexOf(0, offset);
    const end = endOfEntry === -1 ? block.length : endOfEntry;
    const entry = block.subarray(offset, end).toString("utf8");
    const equals = entry.indexOf("=");
    const name = equals === -1 ? "" : entry.slice(0, equals);
    if (end > offset && !KEPT.test(name)) {
      const value = env[name];
      if (name !== "" && value !== undefined) {
        delete env[name];
        env[name] = value;
      }
      blanks.push({ offset, length: end - offset });
    }
    offset = end + 1;
  }
  if (blanks.length === 0) return undefined;
  let fd: number | undefined;
  try {
    fd = openSync("/proc/self/mem", "r+");
    for (const { offset, length } of blanks) writeSync(fd, Buffer.alloc(length), 0, length, start + offset);
  } catch (err) {
    return `cannot write /proc/self/mem: ${(err as Error).message}`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return undefined;
}
