import { describe, expect, it } from "vitest";
import { errorText, excerpt, plural } from "../src/text.js";

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

describe("plural", () => {
  it("adds an s to any count but one", () => {
    expect(plural(0, "file")).toBe("0 files");
    expect(plural(1, "file")).toBe("1 file");
    expect(plural(2, "byte")).toBe("2 bytes");
  });
});
