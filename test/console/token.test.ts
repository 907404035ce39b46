import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readOrCreateToken, readToken, sameSecret, tokenPath } from "../../src/console/token.js";

describe("the console token", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-token-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("is made at first start, 256 random bits, readable by its owner only, and kept across starts", async () => {
    const token = await readOrCreateToken(dir);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await stat(tokenPath(dir))).mode & 0o777).toBe(0o600);
    expect(await readOrCreateToken(dir)).toBe(token);
    expect(await readToken(dir)).toBe(token);
    const other = await mkdtemp(join(tmpdir(), "countd-token-"));
    try {
      expect(await readOrCreateToken(other)).not.toBe(token);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  it("two starts at the same moment agree on one token", async () => {
    const tokens = await Promise.all(Array.from({ length: 8 }, () => readOrCreateToken(dir)));
    expect(new Set(tokens).size).toBe(1);
    expect((await readFile(tokenPath(dir), "utf8")).trim()).toBe(tokens[0]);
  });

  it("narrows a token file others could read to 0600", async () => {
    await writeFile(tokenPath(dir), "a-token-someone-wrote-by-hand-0123456789\n");
    await chmod(tokenPath(dir), 0o644);
    expect(await readOrCreateToken(dir)).toBe("a-token-someone-wrote-by-hand-0123456789");
    expect((await stat(tokenPath(dir))).mode & 0o777).toBe(0o600);
  });

  it("refuses a file holding no usable token, naming the file", async () => {
    await writeFile(tokenPath(dir), "\n", { mode: 0o600 });
    await expect(readOrCreateToken(dir)).rejects.toThrow(`${tokenPath(dir)} holds no console token`);
  });

  it("readToken is undefined when there is no token yet", async () => {
    expect(await readToken(dir)).toBeUndefined();
  });

  it("sameSecret compares whole values", () => {
    expect(sameSecret("abc", "abc")).toBe(true);
    expect(sameSecret("abc", "abcd")).toBe(false);
    expect(sameSecret("", "abc")).toBe(false);
  });
});
