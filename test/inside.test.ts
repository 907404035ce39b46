import { describe, expect, it } from "vitest";
import { isInside, relativeInside } from "../src/inside.js";

describe("isInside", () => {
  it("treats the root and its descendants as inside, siblings sharing a prefix and parents as outside", () => {
    expect(isInside("/ws", "/ws")).toBe(true);
    expect(isInside("/ws/a/b", "/ws")).toBe(true);
    expect(isInside("/ws/..hidden", "/ws")).toBe(true);
    expect(isInside("/ws-evil/x", "/ws")).toBe(false);
    expect(isInside("/", "/ws")).toBe(false);
  });
});

describe("relativeInside", () => {
  it("gives the path below the root, empty for the root itself, nothing for a path outside", () => {
    expect(relativeInside("/ws/a/b", "/ws")).toBe("a/b");
    expect(relativeInside("/ws", "/ws")).toBe("");
    expect(relativeInside("/ws/..hidden", "/ws")).toBe("..hidden");
    expect(relativeInside("/ws-evil/x", "/ws")).toBeUndefined();
    expect(relativeInside("/elsewhere", "/ws")).toBeUndefined();
  });
});
