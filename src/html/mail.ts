import { marked } from "marked";
import { NodeHtmlMarkdown } from "node-html-markdown";
import sanitizeHtml from "sanitize-html";

/** A mail's two bodies. */
export interface MailBodies {
  html: string;
  text: string;
}

/**
 * Markdown as sanitised HTML, and the same content as plain text (markdown rebuilt from the
 * cleaned HTML). The answer is written by an LLM that may have read hostile pages, so its HTML is
 * cut down to what a report needs: no scripts, styles, forms, frames, images (remote loads) or
 * event handlers, and links only to http(s), mailto and tel. Tables, code and links stay. Like the
 * page converters, this costs far more than linear on nested tags, so it runs only in the
 * conversion worker (convert.ts).
 */
export function markdownToMail(markdown: string): MailBodies {
  const html = sanitizeHtml(marked.parse(markdown, { async: false, gfm: true }), {
    allowedTags: [...sanitizeHtml.defaults.allowedTags, "del"],
    allowedAttributes: {
      a: ["href", "title"],
      th: ["align"],
      td: ["align"],
      ol: ["start"],
    },
    allowedSchemes: ["http", "https", "mailto", "tel"],
    allowProtocolRelative: false,
  }).trim();
  return { html, text: NodeHtmlMarkdown.translate(html).trim() };
}
