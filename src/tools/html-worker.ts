import { parentPort } from "node:worker_threads";
import { htmlToReadable, type HtmlFormat } from "./html-readable.js";

export interface ConversionRequest {
  html: string;
  format: HtmlFormat;
}

/** `ready` once, when the converters are loaded: the time limit counts conversion only. */
export type ConversionReply = { ready: true } | { ok: true; text: string } | { ok: false; error: string };

parentPort!.on("message", ({ html, format }: ConversionRequest) => {
  let reply: ConversionReply;
  try {
    reply = { ok: true, text: htmlToReadable(html, format) };
  } catch (err) {
    reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(reply);
});
parentPort!.postMessage({ ready: true } satisfies ConversionReply);
