import { Lexer, type Token, type Tokens } from "marked";

/** The chat services whose messages render a markup of their own. */
export type Dialect = "slack" | "discord" | "feishu" | "dingtalk" | "wecom";

/**
 * How one service writes each construct. Where a service lacks one (Slack and Feishu cards have
 * no headings, DingTalk and WeCom no code blocks, Slack no tables) it gets the nearest it has,
 * so the reader never sees raw markup.
 */
interface Spelling {
  /** Plain text; `raw` is the text as written in the answer, for dialects that are markdown themselves. */
  text(text: string, raw: string): string;
  heading(text: string, depth: number): string;
  strong(text: string): string;
  em(text: string): string;
  del(text: string): string;
  codespan(code: string): string;
  code(code: string, lang: string): string;
  link(href: string, text: string): string;
  bullet: string;
  hr: string;
  table(raw: string): string;
}

/** A fence longer than any backtick run inside, so no text can close it early. */
function fenced(code: string, lang = ""): string {
  const longest = Math.max(0, ...[...code.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}${lang}\n${code}\n${fence}`;
}

/** Code as quoted lines, for services whose markdown has no code blocks; the two spaces are their line break. */
const quotedLines = (code: string) =>
  code
    .split("\n")
    .map((line) => `> ${line}  `)
    .join("\n");

/** Slack's three control characters (https://api.slack.com/reference/surfaces/formatting#escaping): `<!channel>` in an answer must not ping. */
const slackEscape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Feishu card markdown reads `<at id=all></at>` and `<font>` as tags; entities show the characters instead. */
const feishuEscape = (text: string) => text.replace(/</g, "&lt;").replace(/>/g, "&gt;");

const markdownLink = (href: string, text: string) => `[${text}](${href.replace(/[()\s]/g, encodeURIComponent)})`;

const SPELLINGS: Record<Dialect, Spelling> = {
  // mrkdwn: https://api.slack.com/reference/surfaces/formatting
  slack: {
    text: (text) => slackEscape(text),
    heading: (text) => `*${text}*`,
    strong: (text) => `*${text}*`,
    em: (text) => `_${text}_`,
    del: (text) => `~${text}~`,
    codespan: (code) => `\`${slackEscape(code)}\``,
    code: (code) => `\`\`\`\n${slackEscape(code)}\n\`\`\``,
    link: (href, text) => {
      const url = href.replace(/[|<>\s]/g, encodeURIComponent);
      return text === href || text === "" ? `<${url}>` : `<${url}|${text}>`;
    },
    bullet: "•",
    hr: "———",
    table: (raw) => `\`\`\`\n${slackEscape(raw.trim())}\n\`\`\``,
  },
  // Discord markdown: headings of levels 1–3 only, no tables.
  discord: {
    text: (_text, raw) => raw,
    heading: (text, depth) => (depth <= 3 ? `${"#".repeat(depth)} ${text}` : `**${text}**`),
    strong: (text) => `**${text}**`,
    em: (text) => `*${text}*`,
    del: (text) => `~~${text}~~`,
    codespan: (code) => `\`${code}\``,
    code: (code, lang) => fenced(code, lang),
    link: markdownLink,
    bullet: "-",
    hr: "---",
    table: (raw) => fenced(raw.trim()),
  },
  // The markdown element of a Feishu message card: no headings.
  feishu: {
    text: (_text, raw) => feishuEscape(raw),
    heading: (text) => `**${text}**`,
    strong: (text) => `**${text}**`,
    em: (text) => `*${text}*`,
    del: (text) => `~~${text}~~`,
    codespan: (code) => `\`${feishuEscape(code)}\``,
    code: (code, lang) => fenced(feishuEscape(code), lang),
    link: markdownLink,
    bullet: "-",
    hr: "---",
    table: (raw) => fenced(feishuEscape(raw.trim())),
  },
  // DingTalk markdown: headings, quotes, bold, italics, links, lists; no code, no strike-through, no tables.
  dingtalk: {
    text: (_text, raw) => raw,
    heading: (text, depth) => `${"#".repeat(depth)} ${text}`,
    strong: (text) => `**${text}**`,
    em: (text) => `*${text}*`,
    del: (text) => text,
    codespan: (code) => code,
    code: (code) => quotedLines(code),
    link: markdownLink,
    bullet: "-",
    hr: "---",
    table: (raw) => quotedLines(raw.trim()),
  },
  // WeCom group-robot markdown: headings, bold, italics, links, inline code, quotes; no code blocks, lists or tables.
  wecom: {
    text: (_text, raw) => raw,
    heading: (text, depth) => `${"#".repeat(depth)} ${text}`,
    strong: (text) => `**${text}**`,
    em: (text) => `*${text}*`,
    del: (text) => text,
    codespan: (code) => `\`${code}\``,
    code: (code) => quotedLines(code),
    link: markdownLink,
    bullet: "-",
    hr: "---",
    table: (raw) => quotedLines(raw.trim()),
  },
};

/** The answer's markdown (GFM) in the markup `dialect` renders. */
export function toDialect(markdown: string, dialect: Dialect): string {
  const spell = SPELLINGS[dialect];
  return blocks(Lexer.lex(markdown, { gfm: true }), spell).trim();
}

function blocks(tokens: Token[], spell: Spelling): string {
  return tokens
    .map((token) => block(token, spell))
    .filter((part) => part !== "")
    .join("\n\n");
}

function block(token: Token, spell: Spelling): string {
  switch (token.type) {
    case "space":
    case "def":
      return "";
    case "heading":
      return spell.heading(inline((token as Tokens.Heading).tokens, spell), (token as Tokens.Heading).depth);
    case "paragraph":
      return inline((token as Tokens.Paragraph).tokens, spell);
    case "text": {
      const text = token as Tokens.Text;
      return text.tokens ? inline(text.tokens, spell) : spell.text(text.text, text.raw);
    }
    case "code": {
      const code = token as Tokens.Code;
      return spell.code(code.text, code.lang ?? "");
    }
    case "blockquote":
      return blocks((token as Tokens.Blockquote).tokens, spell)
        .split("\n")
        .map((line) => (line === "" ? ">" : `> ${line}`))
        .join("\n");
    case "list":
      return list(token as Tokens.List, spell);
    case "hr":
      return spell.hr;
    case "table":
      return spell.table(token.raw);
    case "html":
      return spell.text(token.raw.trim(), token.raw.trim());
    default:
      return spell.text(token.raw, token.raw);
  }
}

function list(token: Tokens.List, spell: Spelling): string {
  const start = typeof token.start === "number" ? token.start : 1;
  return token.items
    .map((item, index) => {
      const marker = token.ordered ? `${start + index}.` : spell.bullet;
      const body = item.tokens
        .map((child) => block(child, spell))
        .filter((part) => part !== "")
        .join(item.loose ? "\n\n" : "\n");
      const indent = " ".repeat(marker.length + 1);
      return `${marker} ${body.split("\n").join(`\n${indent}`)}`;
    })
    .join(token.loose ? "\n\n" : "\n");
}

function inline(tokens: Token[], spell: Spelling): string {
  return tokens.map((token) => inlineToken(token, spell)).join("");
}

function inlineToken(token: Token, spell: Spelling): string {
  switch (token.type) {
    case "strong":
      return spell.strong(inline((token as Tokens.Strong).tokens, spell));
    case "em":
      return spell.em(inline((token as Tokens.Em).tokens, spell));
    case "del":
      return spell.del(inline((token as Tokens.Del).tokens, spell));
    case "codespan":
      return spell.codespan((token as Tokens.Codespan).text);
    case "escape":
      return spell.text(token.text as string, token.raw);
    case "br":
      return "\n";
    case "link": {
      const link = token as Tokens.Link;
      return spell.link(link.href, inline(link.tokens, spell));
    }
    case "image": {
      // A link rather than an image: a chat client must not load a remote picture the answer names.
      const image = token as Tokens.Image;
      return spell.link(image.href, spell.text(image.text, image.text));
    }
    case "text": {
      const text = token as Tokens.Text;
      return text.tokens ? inline(text.tokens, spell) : spell.text(text.text, text.raw);
    }
    default:
      return spell.text(token.raw, token.raw);
  }
}
