import { statSync } from "node:fs";

/** Whether a file is there, without a trip through the thread pool: most session files a run asks for are not. */
export function fileExists(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false }) !== undefined;
}
