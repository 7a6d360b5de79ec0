// Orders each llama.cpp batch by sequence id, so that sequences generating together are decoded together.
//
// node-llama-cpp creates its contexts with one KV cache per sequence (kv_unified = false). llama.cpp then
// splits a batch into micro-batches ("sequential" split_equal): a micro-batch takes sequences only while
// each one's id is the previous one's + 1, in the order they sit in the batch. node-llama-cpp puts them in
// the order they asked for a decode, which follows promise scheduling: four streams on sequences 0 to 3
// queued as 2, 0, 3, 1 are decoded as three or four llama_decode calls of one or two tokens, not one of four.
// Counted during 4 concurrent 150-token streams: 150 batches became 331 to 435 decodes; ordered, 150.
// (llama-server fills its batch slot by slot, in id order, so it never meets this.)
//
// The allotment of token slots follows node-llama-cpp's default ("maximumParallelism"): an equal share for
// each item first, what is left to the clipped items in equal steps, then by evaluation priority. One
// difference: node-llama-cpp's version does not count down the slots it hands out after the first share,
// so a long prompt is granted more than the batch and the items after it are cut when the batch is
// filled: a generating sequence queued after a prompt lost its step. Here every item keeps its share.
import type { BatchItem, CustomBatchingPrioritizationStrategy, LlamaContext, PrioritizedBatchItem } from "node-llama-cpp";

/** `sequenceOf` names the sequence a batch item belongs to; items it cannot place keep their order, last. */
export function sequenceOrderedStrategy(sequenceOf: (item: BatchItem) => number | undefined): CustomBatchingPrioritizationStrategy {
  return ({ items, size }) => {
    const keyed = items.map((item, index) => ({ item, index, sequence: sequenceOf(item) ?? Number.POSITIVE_INFINITY }));
    keyed.sort((a, b) => a.sequence - b.sequence || a.index - b.index);
    return allot(
      keyed.map((k) => k.item),
      size,
    );
  };
}

/** Token slots for each item, in the given order: an equal share, then the rest to the items that need more. */
export function allot(items: readonly BatchItem[], size: number): PrioritizedBatchItem[] {
  let left = size;
  const share = Math.floor(left / Math.max(1, items.length));
  const result: PrioritizedBatchItem[] = [];
  const clipped: PrioritizedBatchItem[] = [];
  for (const item of items) {
    const entry = { item, processAmount: Math.min(item.tokens.length, left, share) };
    result.push(entry);
    left -= entry.processAmount;
    if (entry.processAmount < item.tokens.length) clipped.push(entry);
    if (left === 0) break;
  }
  const grow = (entry: PrioritizedBatchItem, by: number, index: number): number => {
    entry.processAmount += by;
    left -= by;
    if (entry.processAmount === entry.item.tokens.length) {
      clipped.splice(index, 1);
      return index - 1;
    }
    return index;
  };
  for (let passes = 3; left > 0 && clipped.length > 0 && passes > 0; passes--) {
    const step = Math.ceil(left / clipped.length);
    for (let i = 0; i < clipped.length && left > 0; i++) {
      const entry = clipped[i]!;
      i = grow(entry, Math.min(entry.item.tokens.length - entry.processAmount, left, step), i);
    }
  }
  clipped.sort((a, b) => b.item.evaluationPriority - a.item.evaluationPriority);
  for (let i = 0; i < clipped.length && left > 0; i++) {
    const entry = clipped[i]!;
    i = grow(entry, Math.min(entry.item.tokens.length - entry.processAmount, left), i);
  }
  return result;
}

/**
 * A batch item's sequence, read from node-llama-cpp's queue of decodes: each queued decode holds the very
 * tokens array its batch item shows (`_queuedDecodes`, not public API: with another shape this finds
 * nothing and batches keep node-llama-cpp's own order).
 */
export function queuedSequenceOf(context: () => LlamaContext | undefined): (item: BatchItem) => number | undefined {
  return (item) => {
    const queue = (context() as unknown as { _queuedDecodes?: unknown } | undefined)?._queuedDecodes;
    if (!Array.isArray(queue)) return undefined;
    for (const decode of queue as Array<{ tokens?: unknown; sequenceId?: unknown }>)
      if (decode?.tokens === item.tokens && typeof decode.sequenceId === "number") return decode.sequenceId;
    return undefined;
  };
}
