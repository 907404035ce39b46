import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AttachmentLimits } from "../../src/config/schema.js";
import { createMailer, type Mailer } from "../../src/delivery/email.js";
import type { DeliveryMessage } from "../../src/delivery/message.js";
import type { EmailTarget } from "../../src/delivery/targets.js";
import { deliveryFailure as failure } from "../support/delivery-error.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";

/**
 * Attachments that would make a huge mail: every one is refused before a byte is read, with a
 * delivery error naming the file and the limit, and nothing is sent or written.
 */

const MB = 1024 * 1024;
const DELIVERY_ID = "report.20260301T090000Z-ab12.email-0123456789ab";
const message: DeliveryMessage = {
  kind: "run.completed",
  job: "report",
  run: {
    id: "20260301T090000Z-ab12",
    reason: "schedule",
    status: "ok",
    startedAt: "2026-03-01T09:00:00.000Z",
    finishedAt: "2026-03-01T09:01:00.000Z",
    durationMs: 60_000,
    usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, cacheWriteTokens: 0 },
    cost: null,
  },
  result: "See the attachments.",
};
const target = (attach: string[]): EmailTarget => ({ kind: "email", to: ["ops@example.com"], cc: [], bcc: [], attach });

let dir: string;
let workspace: string;
let stateDir: string;
let peer: SmtpPeer;
let mailers: Mailer[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-attach-"));
  workspace = join(dir, "workspace");
  stateDir = join(dir, "state");
  await mkdir(join(workspace, "out"), { recursive: true });
  peer = await startSmtpPeer();
});
afterEach(async () => {
  for (const mailer of mailers) mailer.close();
  mailers = [];
  await peer.close();
  await rm(dir, { recursive: true, force: true });
});

/** The same delivery over SMTP and as an .eml file: both must refuse. */
function mailersWith(attachments?: AttachmentLimits): Mailer[] {
  const smtp = createMailer({
    smtp: { host: "127.0.0.1", port: peer.port, secure: false, from: "countd <countd@example.com>" },
    stateDir,
    timezone: "UTC",
    ...(attachments ? { attachments } : {}),
  });
  const files = createMailer({ stateDir, timezone: "UTC", ...(attachments ? { attachments } : {}) });
  mailers.push(smtp, files);
  return [smtp, files];
}

async function nothingSent(): Promise<void> {
  expect(peer.attempts).toEqual([]);
  expect(await readdir(join(stateDir, "mail")).catch(() => [])).toEqual([]);
}

async function sparse(name: string, size: number): Promise<void> {
  await writeFile(join(workspace, name), "");
  await truncate(join(workspace, name), size);
}

describe("attachment size limits (defaults: 10 MB a file, 25 MB a message)", () => {
  it("a sparse 256 MB file (nearly nothing on disk) is refused by its size, not read", async () => {
    await sparse("out/huge.bin", 256 * MB);
    for (const mailer of mailersWith()) {
      const err = await failure(mailer.send(target(["out/*.bin"]), message, DELIVERY_ID, workspace));
      expect(err.permanent).toBe(true);
      expect(err.reason).toBe(
        "attachment out/huge.bin is 256MB, over the limit of 10MB per file (attachments.max_file_size in countd.yaml); nothing was sent",
      );
    }
    await nothingSent();
  });

  it("a sparse 1 GB file among ordinary ones is refused the same way", async () => {
    await writeFile(join(workspace, "out/a.csv"), "a,b\n1,2\n");
    await sparse("out/b.csv", 1024 * MB);
    for (const mailer of mailersWith()) {
      const err = await failure(mailer.send(target(["out/*.csv"]), message, DELIVERY_ID, workspace));
      expect(err.reason).toMatch(/^attachment out\/b\.csv is 1GB, over the limit of 10MB per file/);
    }
    await nothingSent();
  });

  it("three sparse files each under the per-file limit, together over the per-message one", async () => {
    for (const name of ["x1.bin", "x2.bin", "x3.bin"]) await sparse(`out/${name}`, 9 * MB);
    for (const mailer of mailersWith()) {
      const err = await failure(mailer.send(target(["out/*.bin"]), message, DELIVERY_ID, workspace));
      expect(err.permanent).toBe(true);
      expect(err.reason).toBe(
        "the 3 attachments matched so far come to 27MB, over the limit of 25MB per message (attachments.max_message_size in countd.yaml); nothing was sent",
      );
    }
    await nothingSent();
  });

  it("many small files over the total, matched by several patterns, with limits from countd.yaml", async () => {
    const limits = { maxFileBytes: 64 * 1024, maxMessageBytes: 256 * 1024 };
    for (let i = 0; i < 12; i++) await writeFile(join(workspace, "out", `part-${String(i).padStart(2, "0")}.txt`), "x".repeat(30 * 1024));
    for (const mailer of mailersWith(limits)) {
      const err = await failure(mailer.send(target(["out/part-0*.txt", "out/part-1*.txt"]), message, DELIVERY_ID, workspace));
      expect(err.reason).toBe(
        "the 9 attachments matched so far come to 270KB, over the limit of 256KB per message (attachments.max_message_size in countd.yaml); nothing was sent",
      );
    }
    await nothingSent();
  });

  it("files within the limits are attached whole", async () => {
    const limits = { maxFileBytes: 64 * 1024, maxMessageBytes: 256 * 1024 };
    await writeFile(join(workspace, "out", "a.txt"), "a".repeat(64 * 1024));
    await writeFile(join(workspace, "out", "b.txt"), "b".repeat(100));
    const [smtp] = mailersWith(limits);
    await smtp!.send(target(["out/*.txt"]), message, DELIVERY_ID, workspace);
    expect(peer.received[0]!.mail.attachments.map((a) => [a.filename, a.size])).toEqual([
      ["a.txt", 64 * 1024],
      ["b.txt", 100],
    ]);
  });

  describe("a file that grows while it is attached", () => {
    let writer: ChildProcess | undefined;
    afterEach(() => {
      writer?.kill("SIGKILL");
      writer = undefined;
    });

    it("is never mailed past the limit: either the size it was checked at, or not at all, temporarily", async () => {
      const limits = { maxFileBytes: 256 * 1024, maxMessageBytes: 1024 * 1024 };
      const file = join(workspace, "out", "growing.log");
      await writeFile(file, "x".repeat(256 * 1024 - 1));
      // Another process appending as fast as it can, as a job's own background writer would.
      writer = spawn(
        process.execPath,
        [
          "-e",
          `const fs=require("fs");const fd=fs.openSync(${JSON.stringify(file)},"a");const b=Buffer.alloc(4096,120);for(;;)fs.writeSync(fd,b)`,
        ],
        {
          stdio: "ignore",
        },
      );
      await new Promise((resolve) => writer!.once("spawn", resolve));
      const [smtp] = mailersWith(limits);
      const outcomes: string[] = [];
      for (let attempt = 0; attempt < 5; attempt++) {
        const result = await smtp!.send(target(["out/*.log"]), message, `${DELIVERY_ID}-${attempt}`, workspace).then(
          () => "sent",
          (err: { reason?: string; permanent?: boolean }) =>
            `${err.permanent ? "permanent" : "temporary"}: ${err.reason?.replace(/[\d.]+[KMG]?B/g, "N")}`,
        );
        outcomes.push(result);
      }
      for (const outcome of outcomes) {
        expect([
          "sent",
          "temporary: attachment out/growing.log changed size while it was being attached (was N); trying again later",
          "permanent: attachment out/growing.log is N, over the limit of N per file (attachments.max_file_size in countd.yaml); nothing was sent",
        ]).toContain(outcome);
      }
      for (const { mail } of peer.received) {
        for (const attachment of mail.attachments) expect(attachment.size).toBeLessThanOrEqual(limits.maxFileBytes);
      }
    });
  });
});
