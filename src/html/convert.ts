import type { Worker } from "node:worker_threads";
import type { MailBodies } from "./mail.js";
import type { HtmlFormat } from "./readable.js";
import type { ConversionReply, ConversionRequest } from "./worker.js";

export class HtmlConversionTimeout extends Error {
  override readonly name = "HtmlConversionTimeout";
}

export interface ConvertOptions {
  /** The worker is terminated when one conversion runs longer. */
  timeoutMs: number;
  signal?: AbortSignal;
}

interface Job {
  request: ConversionRequest;
  timeoutMs: number;
  resolve(result: string | MailBodies): void;
  reject(err: Error): void;
  /** Detaches the caller's abort listener once the job is settled. */
  done(): void;
}

// Run from source (tests, bench) the worker is TypeScript too: a small loader script registers tsx
// in the worker first, since Node 20 does not apply `--import` to a worker's execArgv.
const fromSource = import.meta.url.endsWith(".ts");
const WORKER_FILE = new URL(fromSource ? "./worker.ts" : "./worker.js", import.meta.url);
// Only import(): the script runs as CommonJS or as a module, as the parent's flags say.
const TS_LOADER = `import("node:worker_threads").then(async ({ workerData }) => {
  (await import(workerData.tsx)).register();
  await import(workerData.file);
});`;
/** A hostile page can make the parsers build huge trees; the worker dies alone, not the daemon. */
const WORKER_HEAP_MB = 512;

/**
 * Converts HTML on one worker thread: the converters cost far more than linear on nested or
 * unclosed tags, and untrusted input must never block the daemon's event loop. Conversions run one
 * at a time; one that runs past its time limit is stopped by terminating the worker, and the next
 * conversion starts a new one. The worker starts with the first conversion and keeps the process
 * alive only while it has work.
 */
export class HtmlConverter {
  private worker: Worker | undefined;
  private readonly queue: Job[] = [];
  private current: { job: Job; timer?: NodeJS.Timeout } | undefined;
  private workerReady = false;

  /** A page as markdown or text, for the agent to read. */
  convert(html: string, format: HtmlFormat, options: ConvertOptions): Promise<string> {
    return this.run({ kind: "readable", html, format }, options) as Promise<string>;
  }

  /** A mail's HTML and text bodies from an answer's markdown. */
  mail(markdown: string, options: ConvertOptions): Promise<MailBodies> {
    return this.run({ kind: "mail", markdown }, options) as Promise<MailBodies>;
  }

  private run(request: ConversionRequest, { timeoutMs, signal }: ConvertOptions): Promise<string | MailBodies> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => this.cancel(job, signal!.reason);
      const job: Job = { request, timeoutMs, resolve, reject, done: () => signal?.removeEventListener("abort", onAbort) };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(job);
      this.next();
    });
  }

  /** Stops the worker; the next conversion starts a new one. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private next(): void {
    if (this.current) return;
    const job = this.queue.shift();
    // An idle worker does not keep the process alive; one with work to do does.
    if (!job) return void this.worker?.unref();
    this.current = { job };
    const worker = (this.worker ??= this.startWorker());
    worker.ref();
    worker.postMessage(job.request);
    if (this.workerReady) this.startTimer();
  }

  private startTimer(): void {
    const current = this.current;
    if (!current || current.timer) return;
    const { job } = current;
    current.timer = setTimeout(() => {
      const what = job.request.kind === "mail" ? "rendering the mail" : `converting the HTML to ${job.request.format}`;
      this.settle(job, new HtmlConversionTimeout(`${what} took longer than ${job.timeoutMs / 1000} s`));
      this.stopWorker();
    }, job.timeoutMs);
  }

  private startWorker(): Worker {
    // Loaded with the first conversion: every command that reads countd.yaml reaches this module.
    const { Worker } = process.getBuiltinModule("node:worker_threads");
    const resourceLimits = { maxOldGenerationSizeMb: WORKER_HEAP_MB };
    const worker = fromSource
      ? new Worker(TS_LOADER, {
          eval: true,
          workerData: { tsx: import.meta.resolve("tsx/esm/api"), file: WORKER_FILE.href },
          resourceLimits,
        })
      : new Worker(WORKER_FILE, { resourceLimits });
    this.workerReady = false;
    worker.on("message", (reply: ConversionReply) => {
      if ("ready" in reply) {
        this.workerReady = true;
        this.startTimer();
        return;
      }
      const job = this.current?.job;
      if (!job) return;
      this.settle(job, reply.ok ? reply.result : new Error(`the HTML converter failed: ${reply.error}`));
      this.next();
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      const job = this.current?.job;
      if (job) this.settle(job, new Error(`the HTML conversion worker ${why}`));
      this.next();
    };
    worker.on("error", (err) => lost(`failed: ${err.message}`));
    worker.on("exit", (code) => lost(`exited with code ${code}`));
    return worker;
  }

  private cancel(job: Job, reason: unknown): void {
    const queued = this.queue.indexOf(job);
    if (queued !== -1) this.queue.splice(queued, 1);
    this.settle(job, reason instanceof Error ? reason : new Error(String(reason)));
    if (queued === -1) this.stopWorker();
  }

  private settle(job: Job, outcome: string | MailBodies | Error): void {
    if (this.current?.job === job) {
      clearTimeout(this.current.timer);
      this.current = undefined;
    }
    job.done();
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }

  /** A conversion that must not finish: the only way to stop synchronous code on a thread. */
  private stopWorker(): void {
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
    this.next();
  }
}

/** One worker for the whole process. */
export const htmlConverter = new HtmlConverter();
