import { describe, expect, it } from "vitest";
import { comparedText } from "../../src/delivery/changed.js";

/** Whether two answers count as the same under deliver_when: changed (with `changedOn`, if given). */
const same = (a: string, b: string, changedOn?: string) =>
  comparedText({ changedOn }, { answer: a }) === comparedText({ changedOn }, { answer: b });

describe("what deliver_when: changed compares", () => {
  it.each([
    ["text with other white space and line endings", "All quiet.\r\nNothing new.", "  All quiet. Nothing\n\nnew.  "],
    ["JSON with its keys in another order", '{"a": 1, "b": [1, 2]}', '{"b":[1,2],"a":1}'],
    ["JSON in a Markdown fence", '```json\n{"a": 1}\n```', '{"a": 1}'],
  ])("takes %s as the same", (_what, a, b) => {
    expect(same(a, b)).toBe(true);
  });

  it.each([
    ["other words", "All quiet.", "All quiet!"],
    ["an array in another order, without changed_on", '{"ids": [1, 2]}', '{"ids": [2, 1]}'],
    ["a JSON string and the same text unquoted", '"ok"', "ok"],
  ])("takes %s as a change", (_what, a, b) => {
    expect(same(a, b)).toBe(false);
  });

  it("compares the values changed_on selects in any order, and nothing else", () => {
    const path = "$.items[*].id";
    expect(same('{"items": [{"id": 1, "t": "x"}, {"id": 2}]}', '{"items": [{"id": 2}, {"id": 1, "t": "y"}], "at": "now"}', path)).toBe(
      true,
    );
    expect(same('{"items": [{"id": 1}, {"id": 2}]}', '{"items": [{"id": 1}, {"id": 3}]}', path)).toBe(false);
    expect(same('{"items": [{"id": 1}]}', '{"items": [{"id": 1}, {"id": 1}]}', path)).toBe(false);
  });

  it("compares the typed output when the run has one, whatever the answer's text", () => {
    const text = (output: unknown, answer: string) => comparedText({}, { answer, output });
    expect(text({ b: 1, a: 2 }, "first wording")).toBe(text({ a: 2, b: 1 }, "second wording"));
  });
});
