// The UTF-8 automaton behind the grammar phases' token bans (server/engine/utf8-guard.ts), checked against
// the WHATWG decoder: a byte string is well-formed exactly when the automaton ends at a boundary, and a
// prefix of a well-formed string exactly when it never goes wrong.
import { describe, expect, inject, it } from "vitest";
import { getLlama, type Token } from "node-llama-cpp";
import { UTF8_INVALID, Utf8State, Utf8TokenGuard, irregularTokens, walkUtf8 } from "../../server/engine/utf8-guard.js";
import { PhaseSampling } from "../../server/engine/generation-sampling.js";
import type { PromptSyntax } from "../../server/engine/prompt.js";
import { isLookaheadBias } from "../../server/engine/speculation.js";
import type { EngineRequest } from "../../server/engine/types.js";
import { buildVocab, mulberry32 } from "../../resources/test-model/tiny-model.js";

const fatal = new TextDecoder("utf-8", { fatal: true });
function wellFormed(bytes: Uint8Array): boolean {
  try {
    fatal.decode(bytes);
    return true;
  } catch {
    return false;
  }
}
function wellFormedPrefix(bytes: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: true });
    return true;
  } catch {
    return false;
  }
}

describe("walkUtf8", () => {
  it("agrees with the decoder on every string of one and two bytes", () => {
    const disagreements: string[] = [];
    for (let a = 0; a < 256; a++)
      for (let b = -1; b < 256; b++) {
        const bytes = b < 0 ? Uint8Array.of(a) : Uint8Array.of(a, b);
        const end = walkUtf8(Utf8State.Boundary, bytes);
        if ((end === Utf8State.Boundary) !== wellFormed(bytes) || (end !== UTF8_INVALID) !== wellFormedPrefix(bytes)) disagreements.push(`${[...bytes]}`);
      }
    expect(disagreements).toEqual([]);
  });

  it("agrees with the decoder on 100,000 random strings of three to six bytes, near the edges", () => {
    const random = mulberry32(36);
    // Bytes where the rules turn: leads, the edges of the narrow continuation ranges, ASCII.
    const edges = [0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff];
    const disagreements: string[] = [];
    for (let i = 0; i < 100_000; i++) {
      const n = 3 + Math.floor(random() * 4);
      const bytes = Uint8Array.from({ length: n }, () => (random() < 0.7 ? edges[Math.floor(random() * edges.length)]! : Math.floor(random() * 256)));
      const end = walkUtf8(Utf8State.Boundary, bytes);
      if ((end === Utf8State.Boundary) !== wellFormed(bytes) || (end !== UTF8_INVALID) !== wellFormedPrefix(bytes)) disagreements.push(`${[...bytes]}`);
    }
    expect(disagreements).toEqual([]);
  });

  it("continues where a previous token left off", () => {
    // € is E2 82 AC: split over three tokens, each step only takes what may come next.
    const afterE2 = walkUtf8(Utf8State.Boundary, Uint8Array.of(0xe2));
    expect(afterE2).toBe(Utf8State.Need2);
    expect(walkUtf8(afterE2 as Utf8State, Uint8Array.of(0x82, 0xac))).toBe(Utf8State.Boundary);
    expect(walkUtf8(afterE2 as Utf8State, Uint8Array.of(0x41))).toBe(UTF8_INVALID);
    // After E0 only A0..BF (no overlong forms); after ED only 80..9F (no surrogates); F4 stops at U+10FFFF.
    expect(walkUtf8(Utf8State.AfterE0, Uint8Array.of(0x82))).toBe(UTF8_INVALID);
    expect(walkUtf8(Utf8State.AfterE0, Uint8Array.of(0xa0))).toBe(Utf8State.Need1);
    expect(walkUtf8(Utf8State.AfterED, Uint8Array.of(0xa0))).toBe(UTF8_INVALID);
    expect(walkUtf8(Utf8State.AfterF4, Uint8Array.of(0x90))).toBe(UTF8_INVALID);
    expect(walkUtf8(Utf8State.AfterF0, Uint8Array.of(0x8f))).toBe(UTF8_INVALID);
  });
});

describe("Utf8TokenGuard", () => {
  // A vocabulary's irregular tokens: one byte each for E0, 82, A0, 80, C3, A9, and "C3 41" (ill-formed
  // inside), and one whose bytes could not be read.
  const bytes: Array<[number, number[] | null]> = [[10, [0xe0]], [11, [0x82]], [12, [0xa0]], [13, [0x80]], [14, [0xc3]], [15, [0xa9]], [16, [0xc3, 0x41]], [17, null]];
  const guard = new Utf8TokenGuard(new Map(bytes.map(([t, b]) => [t as Token, b === null ? null : Uint8Array.from(b)])));

  it("bans at a boundary what cannot start a character, and always what is ill-formed or unknown", () => {
    expect([...guard.banned(Utf8State.Boundary)].sort()).toEqual([11, 12, 13, 15, 16, 17]);
  });

  it("bans in the middle of a character what may not come next", () => {
    const afterE0 = guard.next(Utf8State.Boundary, 10 as Token);
    expect(afterE0).toBe(Utf8State.AfterE0);
    // Only A0 and A9 may follow E0 here (82 and 80 would start overlong forms).
    expect([...guard.banned(afterE0)].sort()).toEqual([10, 11, 13, 14, 16, 17]);
    const afterE0A0 = guard.next(afterE0, 12 as Token);
    expect(guard.next(afterE0A0, 13 as Token)).toBe(Utf8State.Boundary);
    expect(guard.next(guard.next(Utf8State.Boundary, 14 as Token), 15 as Token)).toBe(Utf8State.Boundary);
  });

  it("takes a token of whole characters (not in its table) as leading back to a boundary", () => {
    expect(guard.next(Utf8State.Boundary, 99 as Token)).toBe(Utf8State.Boundary);
  });
});

describe("irregularTokens on the tiny model", () => {
  it("finds the byte tokens 80..FF, with their bytes, and nothing else", async () => {
    const llama = await getLlama({ gpu: false });
    const model = await llama.loadModel({ modelPath: inject("tinyModelPath") });
    try {
      const found = irregularTokens(model);
      const vocab = buildVocab();
      const expected = new Map<number, number>();
      for (let b = 0x80; b <= 0xff; b++) expected.set(vocab.id(`<0x${b.toString(16).toUpperCase()}>`), b);
      expect(found.size).toBe(128);
      for (const [token, bytes] of found) expect([...(bytes ?? [])], `token ${token}`).toEqual([expected.get(token)]);
    } finally {
      await model.dispose();
    }
  });
});

describe("a grammar phase's bias read ahead (speculation's guesses, LookaheadBias)", () => {
  it("after(pending) is the bias the phase reads once the pending tokens are sampled, and the state stays where it was", async () => {
    const llama = await getLlama({ gpu: false });
    const model = await llama.loadModel({ modelPath: inject("tinyModelPath") });
    try {
      const grammar = await llama.createGrammarForJsonSchema({ type: "string" });
      const sampling = new PhaseSampling(model, {} as PromptSyntax, { sampling: { temperature: 0 } } as EngineRequest, { answer: grammar, toolNames: null, toolArguments: new Map() }, false);
      const phase = { kind: "answer" } as const;
      const bias = sampling.optionsFor(phase, sampling.constraintsFor(phase)).tokenBias;
      if (!isLookaheadBias(bias)) throw new Error("a grammar phase's bias reads ahead");
      const vocab = buildVocab();
      const [e2, x82, xac] = ["<0xE2>", "<0x82>", "<0xAC>"].map((t) => vocab.id(t) as Token) as [Token, Token, Token];
      const atBoundary = bias();
      // € is E2 82 AC: after E2 a continuation byte must come; read ahead, the phase has not moved.
      const afterE2 = bias.after([e2]);
      expect(afterE2).not.toBe(atBoundary);
      expect(bias.after([e2, x82, xac])).toBe(atBoundary);
      expect(bias()).toBe(atBoundary);
      sampling.sampled(e2);
      expect(bias()).toBe(afterE2);
      const afterE282 = bias.after([x82]);
      expect(afterE282).not.toBe(atBoundary);
      sampling.sampled(x82);
      expect(bias()).toBe(afterE282);
      sampling.sampled(xac);
      expect(bias()).toBe(atBoundary);
    } finally {
      await model.dispose();
    }
  });
});
