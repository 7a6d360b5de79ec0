// The pool's slot choice: reuse a cache the prompt continues; never trade a large warm cache for a small gain.
import { describe, expect, it } from "vitest";
import { pickSlot } from "../../server/engine/sequence-pool.js";

describe("pickSlot", () => {
  it("prefers an empty sequence over erasing a 44k-token cache that shares 57 tokens with the prompt", () => {
    expect(pickSlot(500, [{ shared: 57, held: 44_000, lastUsed: 2 }, { shared: 0, held: 0, lastUsed: 1 }])).toBe(1);
  });

  it("reuses the sequence whose cache the prompt continues", () => {
    expect(pickSlot(44_500, [{ shared: 0, held: 0, lastUsed: 1 }, { shared: 44_000, held: 44_100, lastUsed: 2 }])).toBe(1);
  });

  it("reuses a cache that shares most of what it holds, even if part of it is erased", () => {
    expect(pickSlot(3000, [{ shared: 2000, held: 2600, lastUsed: 5 }, { shared: 0, held: 0, lastUsed: 1 }])).toBe(0);
  });

  it("with every sequence holding another conversation, erases the least valuable cache", () => {
    const slots = [
      { shared: 10, held: 30_000, lastUsed: 1 },
      { shared: 10, held: 2_000, lastUsed: 3 },
      { shared: 10, held: 9_000, lastUsed: 2 },
    ];
    expect(pickSlot(800, slots)).toBe(1);
  });

  it("breaks ties by least recent use", () => {
    expect(pickSlot(100, [{ shared: 0, held: 0, lastUsed: 7 }, { shared: 0, held: 0, lastUsed: 3 }, { shared: 0, held: 0, lastUsed: 5 }])).toBe(1);
  });
});
