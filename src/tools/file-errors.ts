import { FinalToolError, ToolError } from "./types.js";

/** Causes that may pass within a retry's wait: a busy file, a full descriptor table, an interrupted call. */
const PASSING = new Set(["EBUSY", "EAGAIN", "EMFILE", "ENFILE", "EINTR", "ETXTBSY", "ETIMEDOUT"]);

/**
 * A file system error as the LLM should read it, naming the path it gave, and whether another
 * attempt could go otherwise: a missing file or a denied one stays so for the length of a retry.
 */
export function fileError(err: unknown, path: string, notFolder = "has a file where a folder is expected"): Error {
  const code = (err as NodeJS.ErrnoException).code;
  const name = JSON.stringify(path);
  switch (code) {
    case "ENOENT":
      return new FinalToolError(`${name} does not exist`);
    case "EISDIR":
      return new FinalToolError(`${name} is a folder, not a file`);
    case "ENOTDIR":
      return new FinalToolError(`${name} ${notFolder}`);
    case "EACCES":
    case "EPERM":
      return new FinalToolError(`${name} cannot be accessed: permission denied`);
    case "ELOOP":
      return new FinalToolError(`${name} is a symbolic link, or a loop of them, that cannot be opened here`);
    default:
      if (code !== undefined && PASSING.has(code)) return new ToolError(`${name}: ${(err as Error).message}`, true, { cause: err });
      return err instanceof Error ? err : new Error(String(err));
  }
}
