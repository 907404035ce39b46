import { parentPort } from "node:worker_threads";
import { errorText } from "../text.js";
import { markdownToMail, type MailBodies } from "./mail.js";
import { htmlToReadable, type HtmlFormat } from "./readable.js";

/** A page to read (`web_fetch`), or a mail to render from markdown (delivery). */
export type ConversionRequest = { kind: "readable"; html: string; format: HtmlFormat } | { kind: "mail"; markdown: string };

/** `ready` once, when the converters are loaded: the time limit counts conversion only. */
export type ConversionReply = { ready: true } | { ok: true; result: string | MailBodies } | { ok: false; error: string };

function convert(request: ConversionRequest): string | MailBodies {
  return request.kind === "mail" ? markdownToMail(request.markdown) : htmlToReadable(request.html, request.format);
}

parentPort!.on("message", (request: ConversionRequest) => {
  let reply: ConversionReply;
  try {
    reply = { ok: true, result: convert(request) };
  } catch (err) {
    reply = { ok: false, error: errorText(err) };
  }
  parentPort!.postMessage(reply);
});
parentPort!.postMessage({ ready: true } satisfies ConversionReply);
