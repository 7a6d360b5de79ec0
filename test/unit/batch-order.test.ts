import { describe, expect, it } from "vitest";
import type { BatchItem, Token } from "node-llama-cpp";
// node-llama-cpp's own default allotment (not exported by the package; imported by path to compare against).
import { maximumParallelismStrategy } from "../../node_modules/node-llama-cpp/dist/evaluator/LlamaContext/utils/batchItemsPrioritizationStrategies/maximumParallelismStrategy.js";
import { allot, queuedSequenceOf, sequenceOrderedStrategy } from "../../server/engine/batch-order.js";

const item = (tokens: number, evaluationPriority: 1 | 2 | 3 | 4 | 5 = 5): BatchItem => ({
  tokens: Array.from({ length: tokens }, (_, i) => i as Token),
  logits: [],
  evaluationPriority,
});

describe("sequenceOrderedStrategy", () => {
  it("puts the items in ascending sequence order, the ones it cannot place last in their own order", () => {
    const items = [item(1), item(1), item(1), item(1), item(1)];
    const seq = new Map<BatchItem, number>([
      [items[0]!, 2],
      [items[1]!, 0],
      [items[3]!, 3],
      [items[4]!, 1],
    ]);
    const out = sequenceOrderedStrategy((i) => seq.get(i))({ items, size: 512 });
    expect(out.map((p) => items.indexOf(p.item))).toEqual([1, 4, 0, 3, 2]);
    expect(out.every((p) => p.processAmount === 1)).toBe(true);
  });

  it("finds an item's sequence through node-llama-cpp's queue of decodes, by the tokens array itself", () => {
    const a = item(1);
    const b = item(3);
    const context = { _queuedDecodes: [{ sequenceId: 3, tokens: b.tokens }, { sequenceId: 1, tokens: a.tokens }] };
    const lookup = queuedSequenceOf(() => context as never);
    expect(lookup(a)).toBe(1);
    expect(lookup(b)).toBe(3);
    expect(lookup(item(1))).toBeUndefined();
    expect(queuedSequenceOf(() => ({}) as never)(a)).toBeUndefined();
  });
});

describe("allot", () => {
  const amounts = (items: BatchItem[], size: number) => allot(items, size).map((p) => [items.indexOf(p.item), p.processAmount]);

  it("gives each generation step its token", () => {
    expect(amounts([item(1), item(1), item(1), item(1)], 512)).toEqual([[0, 1], [1, 1], [2, 1], [3, 1]]);
  });

  it("fills the batch with a prompt without taking the slot of a step queued after it", () => {
    const items = [item(1), item(900), item(1)];
    expect(amounts(items, 512)).toEqual([[0, 1], [1, 510], [2, 1]]);
    // node-llama-cpp's own strategy grants the prompt all 900 tokens; filling a 512-token batch in order
    // (as its dispatcher does) then leaves no slot for the last step.
    const theirs = maximumParallelismStrategy({ items, size: 512 }).map((p: { item: BatchItem; processAmount: number }) => p.processAmount);
    expect(theirs).toEqual([1, 900, 1]);
  });

  it("shares the batch between prompts in equal steps, then by priority, never beyond its size", () => {
    expect(amounts([item(700), item(300, 3), item(1000, 4)], 512)).toEqual([[0, 171], [1, 171], [2, 170]]);
    expect(amounts([item(5), item(130), item(7), item(600, 1)], 256)).toEqual([[0, 5], [1, 122], [2, 7], [3, 122]]);
    expect(amounts([item(2), item(2), item(2), item(2), item(2)], 4)).toEqual([[0, 1], [1, 1], [2, 1], [3, 1], [4, 0]]);
  });

  it("gives the same token counts as node-llama-cpp's strategy wherever that one stays within the batch", () => {
    for (const [items, size] of [
      [[item(1), item(1), item(1)], 64],
      [[item(40), item(1), item(3)], 64],
      [[item(10), item(10)], 512],
    ] as Array<[BatchItem[], number]>) {
      const theirs = maximumParallelismStrategy({ items, size }).map((p: { item: BatchItem; processAmount: number }) => [items.indexOf(p.item), p.processAmount]);
      expect(amounts(items, size)).toEqual(theirs);
    }
  });
});
