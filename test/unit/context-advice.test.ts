// What coding agents need, and the one piece of advice for a context too short for a prompt: the start-up
// note and the 400 name the same figure for the same reason, and memory only where memory is the reason.
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import {
  agentContextNeed,
  agentContextNote,
  contextFor,
  contextRemedy,
  contextTooLong,
  type ContextFacts,
  type ContextMemory,
} from "../../server/engine/context-advice.js";
import type { MemoryModel } from "../../server/engine/resource-plan.js";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

// The byte-level test model: about 0.98 tokens per character of agent-like text.
const byteLevel = agentContextNeed(0.98);
// Qwen3's tokenizer: about 0.27.
const qwen = agentContextNeed(0.27);
// Issue 36's prompts under the byte-level tokenizer.
const CLAUDE_CODE_PROMPT = 43_959;
const CODEX_PROMPT = 35_100;

const tiny: MemoryModel = { fixedBytes: 4_732_928, bytesPerContextToken: 1024, bytesPerSequenceToken: 1536 };
const qwen4b: MemoryModel = { fixedBytes: 300 * MiB, bytesPerContextToken: 2048, bytesPerSequenceToken: 147_456 };
const qwen4bQ8: MemoryModel = { fixedBytes: 300 * MiB, bytesPerContextToken: 2048, bytesPerSequenceToken: 78_336 };
/** A budget that holds exactly `tokens` of context per sequence with `sequences` sequences. */
const budgetFor = (cost: MemoryModel, tokens: number, sequences: number) =>
  cost.fixedBytes + (cost.bytesPerContextToken + cost.bytesPerSequenceToken * sequences) * tokens;

const ample: ContextMemory = { kind: "RAM", budgetBytes: 19.6 * GiB, costs: [tiny] };

function facts(overrides: Partial<ContextFacts>): ContextFacts {
  return {
    contextSize: 4096,
    sequences: 2,
    trainContextSize: 65536,
    agent: byteLevel,
    contextSizeGiven: false,
    sequencesGiven: false,
    memory: ample,
    ...overrides,
  };
}

const figureOf = (text: string) => Number(/(?:--context-size|at least) (\d+)/.exec(text)?.[1]);

describe("what coding agents need", () => {
  it("sizes the agents' context from the tokenizer: a byte-level one needs about 57k tokens, a BPE one about 22k", () => {
    expect(byteLevel).toEqual({ promptTokens: 49_000, contextSize: 57344 });
    expect(qwen).toEqual({ promptTokens: 13_500, contextSize: 22528 });
    // The prompt, 8192 tokens for the answer and the next turns, rounded up to 1024.
    expect(contextFor(CLAUDE_CODE_PROMPT)).toBe(52224);
    expect(contextFor(0)).toBe(8192);
  });
});

describe("the note and the 400 on issue 36's model (trained on 4096 tokens, 19.6 GiB free)", () => {
  const issue = facts({ trainContextSize: 4096 });

  it("the note: the training length is the limit, a model trained longer can take them; no setting, no memory", () => {
    const note = agentContextNote(issue)!;
    expect(note).toBe(
      "The context is 4096 tokens per sequence; coding agents such as Claude Code and Codex send up to about 49000 tokens " +
        "(with this model's tokenizer) before the first answer, so they will be refused. The model was trained on a context " +
        "of 4096 tokens, so a larger --context-size cannot help; a model trained on a context of at least 57344 tokens can.",
    );
  });

  it("Claude Code's and Codex's first prompts: the same reason and the same figure as the note", () => {
    for (const prompt of [CLAUDE_CODE_PROMPT, CODEX_PROMPT]) {
      const err = contextTooLong(issue, prompt);
      expect(err.message).toBe(
        `This model's context is 4096 tokens per sequence, but the prompt is ${prompt} tokens. Nothing is truncated: shorten the ` +
          "conversation. The model was trained on a context of 4096 tokens, so a larger --context-size cannot help; a model " +
          "trained on a context of at least 57344 tokens can.",
      );
      expect(err.message).not.toMatch(/--sequences|memory|leave it out/);
    }
  });

  it("also when --context-size asks for less than the training length", () => {
    const given = facts({ trainContextSize: 4096, contextSize: 2048, contextSizeGiven: true, automaticContextSize: 4096 });
    expect(contextRemedy(given, CLAUDE_CODE_PROMPT)).toEqual({ reason: "training", figure: 57344 });
    // A prompt the training length takes: the setting, up to that length; one it cannot, the training length.
    expect(contextRemedy(given, 2500)).toEqual({ reason: "setting", figure: 4096, automatic: 4096 });
    expect(contextRemedy(given, 4090)).toEqual({ reason: "training", figure: 57344 });
  });
});

describe("a context too short because of the setting", () => {
  const given = facts({ contextSizeGiven: true, automaticContextSize: 65536 });

  it("the note and every 400 up to an agent's prompt name one figure, and leaving the flag out where that gives enough", () => {
    const note = agentContextNote(given)!;
    expect(note).toContain(
      "so they will be refused. Start the server with --context-size 57344 (SVC_CONTEXT_SIZE=57344), or without --context-size: " +
        "it then sizes the context to 65536 tokens.",
    );
    for (const prompt of [6000, CODEX_PROMPT, CLAUDE_CODE_PROMPT]) {
      const message = contextTooLong(given, prompt).message;
      expect(message).toContain("Nothing is truncated: shorten the conversation, or give the server a longer context. Start the server with --context-size 57344");
      expect(figureOf(message)).toBe(figureOf(note));
      expect(message).not.toMatch(/--sequences|memory|RAM/);
    }
  });

  it("a prompt longer than an agent's: the figure that takes it, up to the training length", () => {
    expect(contextRemedy(given, 60_000)).toEqual({ reason: "setting", figure: 65536, automatic: 65536 });
    expect(contextRemedy(facts({ contextSizeGiven: true, trainContextSize: 131072 }), 60_000)).toEqual({ reason: "setting", figure: 68608, automatic: null });
    expect(contextTooLong(facts({ contextSizeGiven: true, trainContextSize: 131072 }), 60_000).message).toMatch(/--context-size 68608 \(SVC_CONTEXT_SIZE=68608\)\.$/);
    expect(contextRemedy(given, 70_000)).toEqual({ reason: "training", figure: 78848 });
  });

  it("a context as long as the training length already: that is the limit, not the setting", () => {
    // Trained on 50000 tokens: an agent's 49000-token prompt fits, but without room for the answers.
    const full = facts({ contextSize: 50000, trainContextSize: 50000 });
    expect(contextRemedy(full, byteLevel.promptTokens)).toEqual({ reason: "training", figure: 57344 });
  });

  it("says 'without --context-size' only where the server's own size is enough", () => {
    const short = facts({ contextSizeGiven: true, automaticContextSize: 32768 });
    expect(contextRemedy(short, CLAUDE_CODE_PROMPT)).toEqual({ reason: "setting", figure: 57344, automatic: null });
    expect(agentContextNote(short)).not.toMatch(/without --context-size/);
  });

  it("a model trained on fewer tokens than agents need: the note says so; a shorter prompt gets the most the model takes", () => {
    const trained = facts({ trainContextSize: 32768, contextSizeGiven: true, automaticContextSize: 32768 });
    const note = agentContextNote(trained)!;
    expect(note).toMatch(/trained on a context of 32768 tokens, so a larger --context-size cannot help; a model trained on a context of at least 57344 tokens can\.$/);
    expect(contextRemedy(trained, 6000)).toEqual({ reason: "setting", figure: 32768, automatic: 32768 });
  });

  it("a model that does not say what it was trained on: the setting", () => {
    expect(contextRemedy(facts({ trainContextSize: 0, contextSizeGiven: true }), CLAUDE_CODE_PROMPT)).toEqual({ reason: "setting", figure: 57344, automatic: null });
  });

  it("no memory measured: the setting", () => {
    expect(contextRemedy(facts({ memory: undefined }), CLAUDE_CODE_PROMPT)).toEqual({ reason: "setting", figure: 57344, automatic: null });
  });

  it("nothing to say when the context is enough", () => {
    expect(agentContextNote(facts({ contextSize: 65536 }))).toBeNull();
    expect(agentContextNote(facts({ contextSize: 57344 }))).toBeNull();
    expect(contextRemedy(facts({ contextSize: 65536 }), CLAUDE_CODE_PROMPT)).toBeNull();
  });
});

describe("memory, only where it is the reason", () => {
  it("the free memory holds less than agents need even with one sequence: says so, and what helps", () => {
    // Qwen3 4B, sized by the server to the longest single context the memory holds, with an f16 KV cache only.
    const memory: ContextMemory = { kind: "RAM", budgetBytes: budgetFor(qwen4b, 12288, 1), costs: [qwen4b] };
    const short = facts({ agent: qwen, contextSize: 12288, sequences: 1, trainContextSize: 40960, memory });
    expect(contextRemedy(short, qwen.promptTokens)).toEqual({ reason: "memory", figure: 22528, room: 12288 });
    const note = agentContextNote(short)!;
    expect(note).toMatch(/The free RAM \(2\.\d+ GB for the context when the model loaded\) holds at most 12288 tokens of context, with one sequence: /);
    expect(note).toMatch(/close other programs or use a smaller model, or start the server with --context-size 22528 to try anyway/);
    expect(note).not.toMatch(/--sequences|8-bit/);
    // With an 8-bit KV cache the model can take, the room counts it.
    const both: ContextMemory = { kind: "VRAM", budgetBytes: budgetFor(qwen4bQ8, 16384, 1), costs: [qwen4b, qwen4bQ8] };
    const gpu = agentContextNote({ ...short, contextSize: 16384, memory: both })!;
    expect(gpu).toMatch(/The free VRAM \(.+\) holds at most 16384 tokens of context, with one sequence and an 8-bit KV cache/);
    expect(contextRemedy({ ...short, memory: both }, 13_000)).toEqual({ reason: "memory", figure: 22528, room: 16384 });
  });

  it("given --sequences leave too little memory each: the sequences that hold the figure", () => {
    const memory: ContextMemory = { kind: "RAM", budgetBytes: budgetFor(qwen4b, 24576, 2), costs: [qwen4b] };
    const given = facts({ agent: qwen, contextSize: 8192, sequences: 4, sequencesGiven: true, trainContextSize: 40960, memory });
    expect(contextRemedy(given, qwen.promptTokens)).toEqual({ reason: "sequences", figure: 22528, sequences: 2 });
    expect(agentContextNote(given)).toMatch(/The free RAM holds 2 sequences of 22528 tokens, not 4: start the server with --context-size 22528 --sequences 2\.$/);
    // Automatic sequences: --context-size alone (the server then runs as many sequences as fit).
    expect(contextRemedy({ ...given, sequencesGiven: false }, qwen.promptTokens)).toEqual({ reason: "setting", figure: 22528, automatic: null });
  });

  it("memory that holds the prompt but not an agent's: the most it holds", () => {
    const memory: ContextMemory = { kind: "RAM", budgetBytes: budgetFor(qwen4b, 16384, 1), costs: [qwen4b] };
    const given = facts({ agent: qwen, contextSize: 4096, sequences: 1, contextSizeGiven: true, trainContextSize: 40960, memory });
    expect(contextRemedy(given, 6000)).toEqual({ reason: "setting", figure: 16384, automatic: null });
  });

  it("plenty of memory with two sequences (19.6 GiB free): never a word of --sequences", () => {
    for (const f of [facts({}), facts({ contextSizeGiven: true, automaticContextSize: 65536 }), facts({ sequencesGiven: true })]) {
      expect(agentContextNote(f)).not.toMatch(/--sequences|memory|RAM/);
      expect(contextTooLong(f, CLAUDE_CODE_PROMPT).message).not.toMatch(/--sequences|memory|RAM/);
    }
  });
});

describe("the 400", () => {
  it("context_length_exceeded on messages, with the sizes in its details", () => {
    const err = contextTooLong(facts({}), 5000);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ kind: "invalid_request", code: "context_length_exceeded", param: "messages", details: { context_size: 4096, prompt_tokens: 5000 } });
  });

  it("a prompt read only part of the way: its length's estimate", () => {
    expect(contextTooLong(facts({}), 43_505, 8091).message).toMatch(/^This model's context is 4096 tokens per sequence, but the prompt has more than 8091 tokens \(about 43505, by its length\)\. /);
  });
});

describe("the facts on the error body (svc_context), for clients that say it in their own words", () => {
  it("carries the context, the prompt, the training length and the remedy, on both error formats", async () => {
    const { encodeOpenAIError } = await import("../../server/http/openai-errors.js");
    const { encodeAnthropicError } = await import("../../server/http/anthropic-errors.js");
    const given = facts({ contextSize: 4096, contextSizeGiven: true, trainContextSize: 65536 });
    const err = contextTooLong(given, 50_028);
    const expected = { context_size: 4096, prompt_tokens: 50_028, train_context_size: 65536, remedy: contextRemedy(given, 50_028) };
    expect(expected.remedy).toMatchObject({ reason: "setting" });
    expect(encodeOpenAIError(err).error.svc_context).toEqual(expected);
    expect(encodeAnthropicError(err, "req_1").error.details?.svc_context).toEqual(expected);
    // Trained on too little: the remedy says so (no setting helps).
    const short = facts({ contextSize: 4096, trainContextSize: 4096 });
    expect(encodeOpenAIError(contextTooLong(short, 9000)).error.svc_context).toMatchObject({ train_context_size: 4096, remedy: { reason: "training" } });
    // Other errors carry nothing of it.
    expect(encodeOpenAIError(new AppError("invalid_request", "Bad.")).error).not.toHaveProperty("svc_context");
  });
});
