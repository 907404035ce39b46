import { plural } from "../text.js";
import { FinalToolError } from "./types.js";

/*
 * How edit_file changes a file's text: one exact match of old_text, or a range of lines, in the
 * file's own line breaks. A text that does not match is not worth another attempt.
 */

export function replaceText(content: string, oldText: string, newText: string, shown: string): { content: string; summary: string } {
  // Files with Windows line breaks are shown by read_file with plain "\n"; match and write in the file's own style.
  const crlf = content.includes("\r\n");
  const find = crlf ? oldText.replace(/\r?\n/g, "\r\n") : oldText;
  const replacement = crlf ? newText.replace(/\r?\n/g, "\r\n") : newText;
  const at: number[] = [];
  for (let i = content.indexOf(find); i !== -1; i = content.indexOf(find, i + find.length)) at.push(i);
  const lineOf = (index: number): number => content.slice(0, index).split("\n").length;
  if (at.length === 0) {
    throw new FinalToolError(
      `old_text was not found in ${shown}; read the file again and copy the text exactly, whitespace and line breaks included`,
    );
  }
  if (at.length > 1) {
    throw new FinalToolError(
      `old_text was found ${at.length} times in ${shown} (at lines ${at.map(lineOf).join(", ")}); include more of the surrounding text so it matches exactly once, or use start_line/end_line`,
    );
  }
  const index = at[0]!;
  const before = find.split("\n").length;
  const after = replacement.split("\n").length;
  return {
    // Concatenation, not String.replace: "$&" or "$1" in new_text must land in the file as written.
    content: content.slice(0, index) + replacement + content.slice(index + find.length),
    summary: `replaced the text at line ${lineOf(index)} (${plural(before, "line")} became ${plural(after, "line")})`,
  };
}

export function replaceLines(
  content: string,
  start: number,
  end: number,
  newText: string,
  shown: string,
): { content: string; summary: string } {
  const eol = content.includes("\r\n") ? "\r\n" : "\n";
  const endsWithEol = content.endsWith("\n");
  const lines = content === "" ? [] : content.split(eol);
  if (endsWithEol) lines.pop();
  if (end > lines.length) {
    throw new FinalToolError(
      `${end === start ? "start_line" : "end_line"} ${end} is past the end of ${shown}, which has ${plural(lines.length, "line")}`,
    );
  }
  const replacement = newText === "" ? [] : newText.replace(/\r?\n$/, "").split(/\r?\n/);
  lines.splice(start - 1, end - start + 1, ...replacement);
  return {
    content: lines.join(eol) + (endsWithEol && lines.length > 0 ? eol : ""),
    summary: `replaced lines ${start}-${end} with ${plural(replacement.length, "line")}; the file now has ${plural(lines.length, "line")}`,
  };
}
