/** The end mark's words as they read once look-alike differences are taken away. */
const END_SKELETON = "endofexternalcontent";
/** What stands in for a look-alike: its letters no longer spell the end mark in any form. */
const REMOVED = "(end-mark look-alike removed)";

const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

/**
 * `content` with every look-alike of the frame's end mark replaced: whatever reads as "End of
 * external content" once case is folded, compatibility forms (fullwidth letters, ligatures) are
 * decomposed (NFKD), and combining marks, format characters (zero-width ones), spaces of any kind
 * and punctuation are dropped. The frame's random boundary already keeps content from closing it;
 * this keeps a forged mark from even looking like one to the model.
 */
export function withoutEndMarks(content: string): string {
  const { letters, from, to } = skeleton(content);
  let out = "";
  let kept = 0;
  for (let at = letters.indexOf(END_SKELETON); at !== -1; at = letters.indexOf(END_SKELETON, at + END_SKELETON.length)) {
    out += content.slice(kept, from[at]) + REMOVED;
    kept = to[at + END_SKELETON.length - 1]!;
  }
  return kept === 0 ? content : out + content.slice(kept);
}

/** The letters and digits of `text`, folded, each with the span of `text` it came from. */
function skeleton(text: string): { letters: string; from: number[]; to: number[] } {
  let letters = "";
  const from: number[] = [];
  const to: number[] = [];
  for (let i = 0; i < text.length;) {
    const code = text.codePointAt(i)!;
    const end = i + (code > 0xffff ? 2 : 1);
    // Plain ASCII, most of any page, needs no normalisation.
    const folded = code < 0x80 ? text[i]!.toLowerCase() : text.slice(i, end).normalize("NFKD").toLowerCase().normalize("NFKD");
    for (const char of folded) {
      if (!LETTER_OR_DIGIT.test(char)) continue;
      letters += char;
      from.push(i);
      to.push(end);
    }
    i = end;
  }
  return { letters, from, to };
}
