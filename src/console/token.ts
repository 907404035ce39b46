import { randomBytes, timingSafeEqual, createHmac } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { readOrCreateSecret } from "../store/secret-file.js";

/** The console's credential, made at the daemon's first start; only its owner may read it. */
export const TOKEN_FILE = "console.token";

/** Where the running daemon says its console listens: written when it starts listening, removed at stop. */
export const ADDRESS_FILE = "console.json";

/** The control channel: the same API on a Unix socket that only the state directory's owner can open. */
export const SOCKET_FILE = "countd.sock";

export const tokenPath = (stateDir: string) => join(stateDir, TOKEN_FILE);

/**
 * Reads the token, or creates it (mode 0600, never overwriting one another process made at the
 * same moment). A token file others can read is narrowed to 0600: anyone holding it controls the
 * daemon.
 */
export async function readOrCreateToken(stateDir: string): Promise<string> {
  const file = tokenPath(stateDir);
  const token = await readOrCreateSecret(file, randomBytes(32).toString("base64url"), { synced: false });
  if (token.length < 16) throw new Error(`${file} holds no console token; remove it and countd makes a new one at its next start`);
  return token;
}

/** The token as read by a command beside the daemon; undefined when there is none (or it may not be read). */
export async function readToken(stateDir: string): Promise<string | undefined> {
  const token = await readFile(tokenPath(stateDir), "utf8").catch(() => "");
  return token.trim() || undefined;
}

/** Constant-time: a guess that shares a prefix with the token takes as long as one that does not. */
export function sameSecret(given: string, expected: string): boolean {
  const a = createHmac("sha256", "countd").update(given).digest();
  const b = createHmac("sha256", "countd").update(expected).digest();
  return timingSafeEqual(a, b);
}
