import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import * as z from "zod";
import { canonical } from "../agent/breaker.js";
import { readOrCreateSecret } from "../store/secret-file.js";

/**
 * The answers to an approval request, as links in a mail or a chat message: each token says one
 * answer to one request about one pending tool call, until the request's timeout. A token is no
 * credential: it opens nothing of the console and the API, and nothing but its one answer.
 */

export type ApprovalAnswer = "approve" | "deny";

/** The pending tool call an approval is about. `hash`: `callHash` of the call's tool and arguments. */
export interface ApprovalCall {
  run: string;
  job: string;
  hash: string;
}

export interface SignedAnswer {
  approval: string;
  call: ApprovalCall;
  answer: ApprovalAnswer;
  /** Epoch milliseconds: the request's timeout, after which its links are refused. */
  expiresAt: number;
}

export type Verified = { ok: true; answer: ApprovalAnswer } | { ok: false; why: "forged" | "expired" | "other call" | "malformed" };

/**
 * 128 random bits, URL-safe: an approval's id appears in links and in `countd approve <id>`. It
 * never starts with "-", which a command line would read as an option.
 */
export function newApprovalId(): string {
  for (;;) {
    const id = randomBytes(16).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}

/** SHA-256 in hex of a call's tool and arguments, with the arguments' keys sorted: the same call always has the same hash. */
export const callHash = (tool: string, args: unknown): string =>
  createHash("sha256")
    .update(canonical([tool, args]))
    .digest("hex");

/** The payload's first field: a later format changes it, and tokens of this one are then refused as malformed. */
const VERSION = "countd-approval-answer/1";

const payload = z.tuple([
  z.literal(VERSION),
  z.string(),
  z.string(),
  z.string(),
  z.string(),
  z.enum(["approve", "deny"]),
  z.number().int(),
]);

/** `<payload>.<HMAC-SHA256 of the payload>`, both base64url; the payload a JSON array in a fixed order, so it has one form. */
export function signAnswer(key: Buffer, signed: SignedAnswer): string {
  if (!Number.isSafeInteger(signed.expiresAt)) throw new Error(`an approval's expiry must be epoch milliseconds, got ${signed.expiresAt}`);
  const { approval, call, answer, expiresAt } = signed;
  const bytes = Buffer.from(JSON.stringify([VERSION, approval, call.run, call.job, call.hash, answer, expiresAt]));
  return `${bytes.toString("base64url")}.${mac(key, bytes).toString("base64url")}`;
}

/**
 * Whether `token` is an answer signed with `key` for `expected`, and still in time. The signature is
 * checked before anything the token says is believed. It does not say whether the answer was
 * already given: the store does (file-store.ts).
 */
export function verifyAnswer(key: Buffer, token: string, expected: { approval: string; call: ApprovalCall }, now: number): Verified {
  const parts = token.split(".");
  if (parts.length !== 2 || !parts.every((part) => /^[A-Za-z0-9_-]+$/.test(part))) return { ok: false, why: "malformed" };
  const [body, signature] = parts.map((part) => Buffer.from(part, "base64url")) as [Buffer, Buffer];
  if (signature.length !== 32) return { ok: false, why: "malformed" };
  // Base64url leaves spare bits in a last character: a token spelled otherwise than countd wrote it was altered.
  if (body.toString("base64url") !== parts[0] || signature.toString("base64url") !== parts[1]) return { ok: false, why: "forged" };
  if (!timingSafeEqual(mac(key, body), signature)) return { ok: false, why: "forged" };
  const parsed = payload.safeParse(parseJson(body.toString("utf8")));
  if (!parsed.success) return { ok: false, why: "malformed" };
  const [, approval, run, job, hash, answer, expiresAt] = parsed.data;
  const { call } = expected;
  if (approval !== expected.approval || run !== call.run || job !== call.job || hash !== call.hash) return { ok: false, why: "other call" };
  if (now >= expiresAt) return { ok: false, why: "expired" };
  return { ok: true, answer };
}

const mac = (key: Buffer, bytes: Buffer) => createHmac("sha256", key).update(bytes).digest();

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const KEY_FILE = "approval.key";

/**
 * The key that signs approval answers: 32 random bytes, made at the first call (mode 0600, never
 * overwriting one another process made at the same moment) and read thereafter, as the console's
 * token is kept. Unlike the token it is synced before it is used: links already sent must still
 * verify after a power cut. Anyone holding it can answer every approval.
 */
export async function approvalKey(stateDir: string): Promise<Buffer> {
  const file = join(stateDir, KEY_FILE);
  const key = Buffer.from(await readOrCreateSecret(file, randomBytes(32).toString("base64url"), { synced: true }), "base64url");
  if (key.length !== 32) throw new Error(`${file} holds no approval key (32 bytes, base64url); remove it and countd makes a new one`);
  return key;
}
