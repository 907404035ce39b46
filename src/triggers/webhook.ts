import { timingSafeEqual } from "node:crypto";
import bytes from "bytes";
import { Webhook } from "standardwebhooks";
import { resolveSecret } from "../delivery/secrets.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import type { Runner } from "../runner/runner.js";
import type { Seen, WebhookIds } from "../store/webhook-ids.js";
import { errorText } from "../text.js";
import { readBounded } from "./webhook-body.js";
import { MAX_UNVERIFIED_BYTES, UnverifiedBytes, type BodyHold } from "./webhook-budget.js";
import { RateWindow } from "./webhook-rate.js";

/** How far a request's webhook-timestamp may lie from countd's clock: Standard Webhooks' tolerance. */
export const TIMESTAMP_TOLERANCE_S = 5 * 60;
/**
 * Longest headers taken. Node's parser already caps all headers at 16 KB; these keep a request from
 * making countd compare hundreds of signatures or keep a long id for a day.
 */
const MAX_ID = 256;
const MAX_SIGNATURE = 4_096;
/** Secrets' signers kept: one per webhook job, so this bounds only a daemon whose secrets keep changing. */
const MAX_SIGNERS = 1_000;
/** A refusal for want of room: the requests holding it end within the console's 30 s request bound. */
const BUSY_RETRY_S = 10;

export interface HookRequest {
  job: string;
  /** A request header by its lower-case name. */
  header: (name: string) => string | undefined;
  body: AsyncIterable<Uint8Array>;
}

/** What the console answers: a status, a JSON body (`{error}` for a refusal) and headers. */
export interface HookAnswer {
  status: 200 | 202 | 401 | 404 | 409 | 413 | 415 | 429 | 500 | 503;
  body: { error: string } | { run_id?: string; status: "started" | "queued" | "skipped" | "duplicate"; message?: string };
  headers?: Record<string, string>;
}

export interface WebhookTriggerOptions {
  job: (name: string) => Job | undefined;
  runner: Pick<Runner, "request">;
  ids: WebhookIds;
  /** Where the secrets' `${VAR}` references are filled in from, at each request. */
  env: NodeJS.ProcessEnv;
  log?: Logger;
  now?: () => number;
}

const refused = (status: HookAnswer["status"], error: string, headers?: Record<string, string>): HookAnswer => ({
  status,
  body: { error },
  ...(headers ? { headers } : {}),
});

/**
 * Whether a POST to /hooks/<job> fires the job: the Standard Webhooks signature made with the job's
 * secret is its only credential. Every refusal runs nothing and says why in one line; a sender's
 * retry of a request that fired (the same webhook-id) gets the first run's id again.
 */
export class WebhookTrigger {
  private readonly rates = new Map<string, RateWindow>();
  private readonly signers = new Map<string, Webhook>();
  /** Bodies read before their signature is checked, across all requests. */
  private readonly unverified = new UnverifiedBytes();
  private readonly log: Logger;
  private readonly now: () => number;

  constructor(private readonly opts: WebhookTriggerOptions) {
    this.log = (opts.log ?? silentLogger).child({ component: "webhook" });
    this.now = opts.now ?? Date.now;
  }

  /** One signer per secret: a flood of requests should not decode the key again for each. */
  private signer(secret: string): Webhook {
    let signer = this.signers.get(secret);
    if (!signer) {
      if (this.signers.size >= MAX_SIGNERS) this.signers.clear();
      this.signers.set(secret, (signer = new Webhook(secret)));
    }
    return signer;
  }

  async handle(req: HookRequest): Promise<HookAnswer> {
    const hold = this.unverified.hold();
    try {
      return await this.check(req, hold);
    } finally {
      hold.release();
    }
  }

  private async check(req: HookRequest, hold: BodyHold): Promise<HookAnswer> {
    const job = this.opts.job(req.job);
    if (!job) return refused(404, `no job named "${req.job}"`);
    const spec = job.webhook;
    if (!spec) return refused(404, `job "${job.name}" has no webhook: trigger`);
    const length = req.header("content-length");
    if (length !== undefined && Number(length) > spec.maxBody) return refused(413, tooLarge(spec.maxBody));

    const id = req.header("webhook-id");
    const timestamp = req.header("webhook-timestamp");
    const signature = req.header("webhook-signature");
    if (!id || !timestamp || !signature)
      return refused(
        401,
        "missing signature: a request needs the webhook-id, webhook-timestamp and webhook-signature headers (Standard Webhooks)",
      );
    if (id.length > MAX_ID || signature.length > MAX_SIGNATURE)
      return refused(401, `bad signature: webhook-id may hold at most ${MAX_ID} characters, webhook-signature ${MAX_SIGNATURE}`);
    const skew = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) - Math.floor(this.now() / 1000) : Number.NaN;
    if (!(Math.abs(skew) <= TIMESTAMP_TOLERANCE_S)) {
      return refused(
        401,
        Number.isNaN(skew)
          ? "bad timestamp: webhook-timestamp must be whole seconds since 1970"
          : `timestamp outside 5 minutes: webhook-timestamp is ${Math.abs(skew)} s ${skew < 0 ? "behind" : "ahead of"} countd's clock`,
      );
    }

    const body = await readBounded(req.body, spec.maxBody, hold);
    if (body === "too large") return refused(413, tooLarge(spec.maxBody));
    if (body === "busy")
      return refused(503, `busy: countd holds ${bytes(MAX_UNVERIFIED_BYTES)} of webhook bodies not yet checked; retry later`, {
        "Retry-After": String(BUSY_RETRY_S),
      });
    let payload: string;
    try {
      payload = new TextDecoder("utf-8", { fatal: true }).decode(body);
    } catch {
      return refused(415, "the body is not UTF-8: send JSON or text");
    }

    const secret = resolveSecret(spec.secret, this.opts.env);
    if ("problem" in secret) {
      this.log.error(
        { job: job.name, problem: secret.problem },
        "a webhook request could not be checked: the job's webhook secret cannot be used",
      );
      return refused(500, `countd cannot check signatures for job "${job.name}": its webhook secret is not usable (see countd's log)`);
    }
    if (!signatureMatches(this.signer(secret.secret), id, Number(timestamp), payload, signature)) {
      this.log.debug({ job: job.name }, "webhook request refused: bad signature");
      return refused(401, "bad signature: webhook-signature does not match the body signed with the job's secret");
    }

    const seen = this.opts.ids.get(secret.secret, id, this.now());
    // The signature does not cover the job: the same request sent to another job with this secret is a replay.
    if (seen && seen.job !== job.name)
      return refused(409, `webhook-id "${id}" already fired another job signed with this secret: nothing was run`);
    if (seen && !seen.skipped)
      return {
        status: 200,
        body: {
          status: "duplicate",
          ...(seen.run ? { run_id: seen.run } : {}),
          message: `webhook-id "${id}" was already taken: nothing was run again`,
        },
      };

    let rate = this.rates.get(job.name);
    if (!rate || rate.limit !== spec.rate) this.rates.set(job.name, (rate = new RateWindow(spec.rate)));
    const wait = rate.take(this.now());
    if (wait > 0)
      return refused(429, `over the rate: job "${job.name}" takes ${spec.rate} requests a minute`, {
        "Retry-After": String(Math.ceil(wait / 1000)),
      });

    return this.fire(job, secret.secret, id, payload);
  }

  private async fire(job: Job, secret: string, id: string, payload: string): Promise<HookAnswer> {
    let fire;
    try {
      fire = this.opts.runner.request({ job: job.name, reason: "webhook", scheduledAt: new Date(this.now()), payload });
    } catch (err) {
      return refused(503, errorText(err));
    }
    if (fire.decision === "skipped") {
      // Taken for this job only: the sender's retry may find the job free, and no other job with the secret may take it.
      await this.keep(job, secret, id, { job: job.name, at: this.now(), skipped: true });
      return { status: 409, body: { status: "skipped", run_id: fire.run!.id, message: `not run: ${fire.run!.error ?? "skipped"}` } };
    }
    const run = fire.run?.id;
    await this.keep(job, secret, id, { job: job.name, at: this.now(), ...(run ? { run } : {}) });
    if (!run) {
      void fire.started
        .then(async (started) => this.opts.ids.started(secret, id, started?.id ?? (await fire.ended).record.id))
        .catch((err: unknown) =>
          this.log.error({ job: job.name, error: errorText(err) }, "could not record the run a queued webhook request became"),
        );
    }
    this.log.info({ job: job.name, runId: run, decision: fire.decision }, "webhook request fired the job");
    return { status: 202, body: { status: fire.decision, ...(run ? { run_id: run } : {}) } };
  }

  private async keep(job: Job, secret: string, id: string, seen: Seen): Promise<void> {
    try {
      await this.opts.ids.add(secret, id, seen);
    } catch (err) {
      // The answer still says what happened, or the sender would retry and run the job again now.
      this.log.error(
        { job: job.name, webhookId: id, error: errorText(err) },
        "could not keep the webhook-id: a retry of this request after a restart would be taken again",
      );
    }
  }
}

function tooLarge(max: number): string {
  return `body too large: job's webhook takes at most ${max} bytes (max_body)`;
}

/**
 * Standard Webhooks' check, as the library's verify does it (its own signature, compared in constant
 * time with each "v1," signature the header lists), without the exception verify throws on a
 * mismatch: building one, with its stack, was the largest part of refusing a forged request.
 */
function signatureMatches(signer: Webhook, id: string, timestamp: number, payload: string, header: string): boolean {
  const expected = Buffer.from(signer.sign(id, new Date(timestamp * 1000), payload).split(",")[1]!);
  return header.split(" ").some((versioned) => {
    const [version, given] = versioned.split(",");
    if (version !== "v1" || given === undefined) return false;
    const candidate = Buffer.from(given);
    return candidate.length === expected.length && timingSafeEqual(candidate, expected);
  });
}
