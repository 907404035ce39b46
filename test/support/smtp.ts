import { createServer, type AddressInfo } from "node:net";
import { simpleParser, type ParsedMail } from "mailparser";
import { SMTPServer } from "smtp-server";

/**
 * What one connection gets: "refuse" resets it as soon as it is accepted (the client sees the
 * connection fail, as when the server is down), 451 and 550 refuse the message after DATA,
 * "accept" takes it.
 */
export type SmtpStep = "refuse" | 451 | 550 | "accept";

export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  mail: ParsedMail;
  raw: Buffer;
}

export interface SmtpPeer {
  port: number;
  /** Accepted messages, in order. */
  received: ReceivedMail[];
  /** The step each connection got, in order. */
  attempts: SmtpStep[];
  /** Steps for the next connections; once they are used up every connection is accepted. */
  script(...steps: SmtpStep[]): void;
  /** Resolves once `count` messages have been accepted in total. */
  waitFor(count: number): Promise<void>;
  close(): Promise<void>;
}

/** A real SMTP server (smtp-server) on 127.0.0.1 that parses what it accepts with mailparser. */
export async function startSmtpPeer(opts: { steps?: SmtpStep[]; auth?: { user: string; pass: string } } = {}): Promise<SmtpPeer> {
  const queue: SmtpStep[] = [...(opts.steps ?? [])];
  const attempts: SmtpStep[] = [];
  const received: ReceivedMail[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const stepOf = new Map<string, SmtpStep>();
  let connections = 0;

  const smtp = new SMTPServer({
    logger: false,
    authOptional: !opts.auth,
    allowInsecureAuth: true,
    // No STARTTLS: the client would upgrade and then refuse smtp-server's self-signed certificate.
    disabledCommands: opts.auth ? ["STARTTLS"] : ["STARTTLS", "AUTH"],
    onAuth(auth, _session, callback) {
      if (auth.username === opts.auth?.user && auth.password === opts.auth?.pass) return callback(null, { user: auth.username });
      callback(Object.assign(new Error("Authentication credentials invalid"), { responseCode: 535 }));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const step = stepOf.get(session.id);
        if (step === 451) return callback(Object.assign(new Error("Temporary local problem, try again later"), { responseCode: 451 }));
        if (step === 550) return callback(Object.assign(new Error("Mailbox unavailable"), { responseCode: 550 }));
        const raw = Buffer.concat(chunks);
        const mailFrom = session.envelope.mailFrom;
        simpleParser(raw).then(
          (mail) => {
            received.push({
              envelope: { from: mailFrom ? mailFrom.address : "", to: session.envelope.rcptTo.map((rcpt) => rcpt.address) },
              mail,
              raw,
            });
            for (const waiter of waiters.filter((w) => received.length >= w.count)) {
              waiters.splice(waiters.indexOf(waiter), 1);
              waiter.resolve();
            }
            callback();
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  smtp.on("error", () => {});

  const front = createServer((socket) => {
    const step = queue.shift() ?? "accept";
    attempts.push(step);
    if (step === "refuse") {
      socket.resetAndDestroy();
      return;
    }
    const id = `connection-${++connections}`;
    stepOf.set(id, step);
    smtp.connect(socket, { id });
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));

  return {
    port: (front.address() as AddressInfo).port,
    received,
    attempts,
    script: (...steps) => queue.push(...steps),
    waitFor: (count) => (received.length >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }))),
    close: async () => {
      await new Promise<void>((resolve) => front.close(() => resolve()));
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    },
  };
}
