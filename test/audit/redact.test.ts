import { describe, expect, it } from "vitest";
import { REDACTED, Redactor } from "../../src/audit/redact.js";

const KEY = "sk-test-0123456789abcdef";

/** A text redacted piece by piece, as the console streams an answer: what a reader would see in all. */
function streamed(redactor: Redactor, pieces: string[]): string[] {
  const shown: string[] = [];
  let held = "";
  for (const piece of pieces) {
    const next = redactor.redactStreamed(held + piece);
    held = next.held;
    if (next.ready !== "") shown.push(next.ready);
  }
  if (held !== "") shown.push(redactor.redact(held));
  return shown;
}

describe("Redactor.redactStreamed", () => {
  it("redacts a secret split across pieces at any point", () => {
    const redactor = new Redactor([KEY]);
    const text = `before ${KEY} after`;
    for (let a = 1; a < text.length; a++) {
      for (const b of [a + 1, a + 5, text.length - 1]) {
        if (b <= a || b >= text.length) continue;
        const shown = streamed(redactor, [text.slice(0, a), text.slice(a, b), text.slice(b)]);
        expect(shown.join("")).toBe("before [REDACTED] after");
        // No piece shows six characters of the key in a row.
        for (const piece of shown) for (let i = 0; i + 6 <= KEY.length; i++) expect(piece).not.toContain(KEY.slice(i, i + 6));
      }
    }
  });

  it("holds back only an end that could start a secret, and nothing without secrets", () => {
    const redactor = new Redactor([KEY]);
    expect(redactor.redactStreamed("plain text")).toEqual({ ready: "plain text", held: "" });
    expect(redactor.redactStreamed("the key: sk-te")).toEqual({ ready: "the key: ", held: "sk-te" });
    expect(redactor.redactStreamed(`${KEY} and s`)).toEqual({ ready: "[REDACTED] and ", held: "s" });
    expect(new Redactor([]).redactStreamed("sk-te")).toEqual({ ready: "sk-te", held: "" });
  });

  it("does not cut a whole secret whose end also starts a secret", () => {
    const redactor = new Redactor(["abab-secret-abab"]);
    expect(redactor.redactStreamed("x abab-secret-abab")).toEqual({ ready: "x [REDACTED]", held: "" });
  });
});

describe("Redactor's encoded forms", () => {
  const secret = "s3cr3t-t0ken+/value";
  const redactor = new Redactor([secret]);
  const hidden = (text: string) => expect(redactor.redact(text)).toContain(REDACTED);

  it("finds a secret's base64 alone, padded or not, in both alphabets, and its hex in either case", () => {
    const base64 = Buffer.from(secret).toString("base64");
    for (const form of [base64, base64.replace(/=+$/, ""), base64.replace(/\+/g, "-").replace(/\//g, "_")]) {
      expect(redactor.redact(`x ${form} y`)).toBe(`x ${REDACTED} y`);
    }
    const hex = Buffer.from(secret).toString("hex");
    expect(redactor.redact(hex)).toBe(REDACTED);
    expect(redactor.redact(hex.toUpperCase())).toBe(REDACTED);
  });

  it("finds it inside a longer base64 text at every offset, so nothing decodes back to it", () => {
    for (const prefix of ["", "u:", "us:", "user:"]) {
      for (const encode of [(b: Buffer) => b.toString("base64"), (b: Buffer) => b.toString("base64url")]) {
        const text = encode(Buffer.from(`${prefix}${secret}@host`));
        hidden(text);
        const left = redactor.redact(text).split(REDACTED).join("");
        expect(Buffer.from(left, "base64").toString("latin1")).not.toContain(secret.slice(0, 6));
      }
    }
  });

  it("leaves short secrets' encodings alone, whose few characters turn up by chance", () => {
    const short = new Redactor(["abcd1"]);
    expect(short.redact(Buffer.from("abcd1").toString("hex"))).toBe(Buffer.from("abcd1").toString("hex"));
  });
});
