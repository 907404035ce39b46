import { describe, expect, it } from "vitest";
import { errorText, excerpt, plural, thousands } from "../src/text.js";

describe("errorText", () => {
  it("gives an Error's message and anything else thrown as String() shows it", () => {
    expect(errorText(new TypeError("bad input"))).toBe("bad input");
    expect(errorText("plain string")).toBe("plain string");
    expect(errorText(42)).toBe("42");
    expect(errorText(undefined)).toBe("undefined");
  });
});

describe("excerpt", () => {
  it("keeps a text of at most max characters whole and cuts a longer one, marked and followed by the note", () => {
    expect(excerpt("12345", 5, " [more]")).toBe("12345");
    expect(excerpt("123456", 5)).toBe("12345…");
    expect(excerpt("123456", 5, " (6 characters)")).toBe("12345… (6 characters)");
  });
});

describe("thousands", () => {
  it('writes a whole number as toLocaleString("en-US") does', () => {
    for (const n of [0, 7, 999, 1_000, 20_000, 123_456, 1_000_000, 9_876_543_210, -1_234])
      expect(thousands(n)).toBe(n.toLocaleString("en-US"));
  });
});

describe("plural", () => {
  it("adds an s to any count but one", () => {
    expect(plural(0, "file")).toBe("0 files");
    expect(plural(1, "file")).toBe("1 file");
    expect(plural(2, "byte")).toBe("2 bytes");
  });
});
