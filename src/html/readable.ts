import { NodeHtmlMarkdown } from "node-html-markdown";
import { parse as parseHtml } from "node-html-parser";

export type HtmlFormat = "markdown" | "text";

/**
 * A page as markdown or plain text. Both converters cost far more than linear on nested or
 * unclosed tags, so this runs only inside the conversion worker (convert.ts), never on the
 * daemon's main thread.
 */
export function htmlToReadable(html: string, format: HtmlFormat): string {
  if (format === "markdown") return NodeHtmlMarkdown.translate(html);
  const root = parseHtml(html);
  for (const element of root.querySelectorAll("script, style, noscript, template")) element.remove();
  // The body alone, as in the markdown form; outside it the parser would keep the doctype as text.
  const text = (root.querySelector("body") ?? root).structuredText;
  return text
    .split("\n")
    .map((line) => line.trim())
    .join("\n");
}
