import type { SmtpConfig } from "../config/schema.js";
import type { Logger } from "../log.js";

/**
 * nodemailer signs in only when the server offers AUTH; otherwise it sends without, and says
 * nothing. A server that offers no AUTH to a client meant to sign in is a wrong port, host or
 * TLS setting more often than an open relay, so the first send of a mailer with `smtp.user`
 * asks the server what it offers, on a connection of its own opened as nodemailer's is (STARTTLS
 * when offered, then EHLO again), and warns when AUTH is not among it.
 */
export function authCheck(smtp: SmtpConfig, timeoutMs: number, log: Logger): () => Promise<void> {
  let checked: Promise<void> | undefined;
  return () =>
    (checked ??= offersAuth(smtp, timeoutMs).then(
      (offered) => {
        if (!offered)
          log.warn(
            { host: smtp.host, port: smtp.port },
            "smtp.user is set but the mail server offers no AUTH: mail is sent without signing in",
          );
      },
      // A server that cannot be reached fails the send itself, which says why; ask again next time.
      () => {
        checked = undefined;
      },
    ));
}

async function offersAuth(smtp: SmtpConfig, timeoutMs: number): Promise<boolean> {
  const { default: SMTPConnection } = await import("nodemailer/lib/smtp-connection");
  const connection = new SMTPConnection({
    host: smtp.host,
    port: smtp.port,
    secure: smtp.secure,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  });
  // Kept for the connection's life: an error event with no listener would end the process.
  const failed = new Promise<never>((_, reject) => connection.on("error", reject));
  try {
    await Promise.race([new Promise<void>((resolve) => connection.connect(() => resolve())), failed]);
  } catch (err) {
    connection.close();
    throw err;
  }
  connection.quit();
  return connection.allowsAuth;
}
