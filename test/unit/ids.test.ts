import { describe, expect, it } from "vitest";
import { newId } from "../../server/core/ids.js";

describe("newId", () => {
  it("is the prefix and 24 base62 characters by default, or the length asked for", () => {
    expect(newId("req_")).toMatch(/^req_[A-Za-z0-9]{24}$/);
    expect(newId("file-", 10)).toMatch(/^file-[A-Za-z0-9]{10}$/);
    expect(newId("", 1)).toMatch(/^[A-Za-z0-9]$/);
  });

  it("never repeats across many pool refills", () => {
    const ids = new Set(Array.from({ length: 20_000 }, () => newId("x", 12)));
    expect(ids.size).toBe(20_000);
  });

  it("uses every character about equally often", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 4_000; i++) for (const c of newId("", 31)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (4_000 * 31) / 62; // 2000 each
    for (const n of counts.values()) expect(Math.abs(n - expected)).toBeLessThan(expected * 0.15);
  });
});
