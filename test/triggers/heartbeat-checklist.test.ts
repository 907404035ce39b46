import { describe, expect, it } from "vitest";
import { checklistIsActionable } from "../../src/triggers/heartbeat.js";

// HEARTBEAT.md is read as Markdown (marked's lexer), not line by line.
describe("checklistIsActionable, as Markdown", () => {
  it.each([
    ["an open task nested under a ticked one", "- [x] taxes\n  - [ ] keep the receipts", true],
    ["ticked tasks nested under ticked ones", "- [x] taxes\n  - [x] keep the receipts", false],
    ["an underlined (setext) heading", "Tasks\n=====\n", false],
    ["a task in a quote", "> - [ ] reply to Anna", true],
    ["a ticked task in a quote", "> - [x] replied to Anna", false],
    ["a comment as the only text of a list item", "- <!-- nothing yet -->", false],
    ["a comment inside a line of text", "water <!-- daily --> the plants", true],
    ["an unchecked task numbered with a parenthesis", "1) [ ] renew the domain", true],
  ])("%s → %s", (_what, text, expected) => {
    expect(checklistIsActionable(text)).toBe(expected);
  });
});
