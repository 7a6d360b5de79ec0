// What context a coding agent needs with a model, and the one piece of advice for a context too short for a
// prompt, composed from the facts: the prompt, the context in use, what the model was trained on and what
// the free memory holds. The start-up note (the log, /health, the desktop window) and the context-too-long
// 400 both come from here, so for the same model they name the same figure and the same reason.
import { AppError } from "../core/errors.js";
import { formatBytes } from "../core/format.js";
import type { MemoryModel } from "./resource-plan.js";

/** Tokens kept for the answer and the next turns on top of a prompt. */
export const ANSWER_ROOM = 8192;
/** Tokens the engine keeps free at the end of the context for forced markers (thought close, call suffix). */
export const CONTEXT_MARGIN = 16;
/**
 * Characters of the largest first request a coding agent sends: Claude Code 2.1 (system prompt, 12 tools,
 * environment block) renders to about 48,000 characters; Codex CLI to about 27,000.
 */
export const AGENT_FIRST_REQUEST_CHARS = 50_000;
/** Suggested context sizes are multiples of this. */
const FIGURE_STEP = 1024;
/** What the free memory holds is counted in the context planner's steps (resource-plan.ts). */
const ROOM_STEP = 256;

/** The context a prompt needs: the prompt and room for the answer and the next turns, rounded up. */
export function contextFor(promptTokens: number): number {
  return Math.ceil((Math.max(0, promptTokens) + ANSWER_ROOM) / FIGURE_STEP) * FIGURE_STEP;
}

export interface AgentContextNeed {
  /** Tokens of the largest first request, with this model's tokenizer. */
  promptTokens: number;
  /** The context that takes it with room to answer: the figure every message names. */
  contextSize: number;
}

/** What a coding agent needs with this model, from how many tokens its tokenizer makes per character. */
export function agentContextNeed(tokensPerChar: number): AgentContextNeed {
  const promptTokens = Math.ceil(AGENT_FIRST_REQUEST_CHARS * Math.max(0, tokensPerChar));
  return { promptTokens, contextSize: contextFor(promptTokens) };
}

export interface ContextMemory {
  /** Where the context lives. */
  kind: "RAM" | "VRAM";
  /** Bytes a context could take when the model loaded. */
  budgetBytes: number;
  /** What a context costs with each KV cache type the model can take (f16, then q8_0 where it can). */
  costs: readonly MemoryModel[];
}

export interface ContextFacts {
  /** Tokens per sequence in use. */
  contextSize: number;
  sequences: number;
  /** What the model was trained on; 0 when its GGUF does not say. */
  trainContextSize: number;
  agent: AgentContextNeed;
  /** Whether --context-size / --sequences were given (else the server sized them to the memory). */
  contextSizeGiven: boolean;
  sequencesGiven: boolean;
  /** The context the server would size without --context-size (the same --sequences); when it was given. */
  automaticContextSize?: number;
  /** What the free memory held when the model loaded; absent where not measured. */
  memory?: ContextMemory;
}

/** What a context-too-long error tells clients (`svc_context` on its body): the facts and the remedy. */
export interface ContextErrorFacts {
  context_size: number;
  prompt_tokens: number;
  /** What the model was trained on; 0 when its GGUF does not say. */
  train_context_size: number;
  remedy: ContextRemedy | null;
}

/** Why a prompt does not fit, and the figure that would take it (and what coding agents need where it can). */
export type ContextRemedy =
  /** The model was trained on fewer tokens than needed: no setting helps, another model does. */
  | { reason: "training"; figure: number }
  /** Only the setting stands in the way; `automatic`: what leaving --context-size out gives, when enough. */
  | { reason: "setting"; figure: number; automatic: number | null }
  /** The given --sequences leave too little memory per sequence; `sequences` of the figure fit. */
  | { reason: "sequences"; figure: number; sequences: number }
  /** The free memory holds at most `room` tokens, even for one sequence. */
  | { reason: "memory"; figure: number; room: number };

/** The longest context per sequence the memory held with this many sequences (a multiple of ROOM_STEP). */
function roomFor(memory: ContextMemory, sequences: number): number {
  let best = 0;
  for (const cost of memory.costs) {
    const perToken = cost.bytesPerContextToken + cost.bytesPerSequenceToken * sequences;
    const room = memory.budgetBytes - cost.fixedBytes;
    if (room <= 0) continue;
    const tokens = perToken > 0 ? room / perToken : Number.POSITIVE_INFINITY;
    best = Math.max(best, Math.floor(tokens / ROOM_STEP) * ROOM_STEP);
  }
  return best;
}

/**
 * What would take a prompt of this many tokens; null when the context already does. The figure is what coding
 * agents need with this model, or more for a longer prompt, so every message for one model names the same
 * one; it is lowered only to what the model was trained on or the memory holds, where the prompt still fits.
 * The training length is the limit when the prompt does not fit in it, or when the context is that long
 * already. Memory is named only where it is what stands in the way.
 */
export function contextRemedy(facts: ContextFacts, promptTokens: number): ContextRemedy | null {
  const needed = contextFor(promptTokens);
  if (needed <= facts.contextSize) return null;
  const train = facts.trainContextSize;
  let figure = Math.max(needed, facts.agent.contextSize);
  if (train > 0 && (promptTokens + CONTEXT_MARGIN >= train || Math.min(figure, train) <= facts.contextSize)) return { reason: "training", figure };
  if (train > 0) figure = Math.min(figure, train);
  const memory = facts.memory;
  if (memory) {
    const alone = roomFor(memory, 1);
    if (alone < needed) return { reason: "memory", figure, room: alone };
    figure = Math.min(figure, alone);
    if (facts.sequencesGiven && facts.sequences > 1 && roomFor(memory, facts.sequences) < figure) {
      let sequences = facts.sequences - 1;
      while (sequences > 1 && roomFor(memory, sequences) < figure) sequences--;
      return { reason: "sequences", figure, sequences };
    }
  }
  const automatic = facts.contextSizeGiven && facts.automaticContextSize !== undefined && facts.automaticContextSize >= figure ? facts.automaticContextSize : null;
  return { reason: "setting", figure, automatic };
}

/** The remedy in the CLI's words: the setting, or why no setting helps. */
export function describeRemedy(remedy: ContextRemedy, facts: ContextFacts): string {
  const figure = remedy.figure;
  switch (remedy.reason) {
    case "training":
      return (
        `The model was trained on a context of ${facts.trainContextSize} tokens, so a larger --context-size cannot help; ` +
        `a model trained on a context of at least ${figure} tokens can.`
      );
    case "setting":
      return (
        `Start the server with --context-size ${figure} (SVC_CONTEXT_SIZE=${figure})` +
        `${remedy.automatic === null ? "" : `, or without --context-size: it then sizes the context to ${remedy.automatic} tokens`}.`
      );
    case "sequences":
      return (
        `The free ${facts.memory!.kind} holds ${remedy.sequences} sequence${remedy.sequences === 1 ? "" : "s"} of ${figure} tokens, ` +
        `not ${facts.sequences}: start the server with --context-size ${figure} --sequences ${remedy.sequences}.`
      );
    case "memory": {
      const memory = facts.memory!;
      return (
        `The free ${memory.kind} (${formatBytes(memory.budgetBytes)} for the context when the model loaded) holds at most ` +
        `${remedy.room} tokens of context, with one sequence${memory.costs.length > 1 ? " and an 8-bit KV cache" : ""}: ` +
        `close other programs or use a smaller model, or start the server with --context-size ${figure} to try anyway ` +
        `(the model does not load if it does not fit).`
      );
    }
  }
}

/** "about 49000": the agents' prompt is an estimate from a character count. */
function about(tokens: number): number {
  return Math.max(1000, Math.round(tokens / 1000) * 1000);
}

/**
 * Why the context falls short of what coding agents need, and what would fix it; null when it does not.
 * Shown at start-up, in /health and in the desktop window.
 */
export function agentContextNote(facts: ContextFacts): string | null {
  const remedy = contextRemedy(facts, facts.agent.promptTokens);
  if (!remedy) return null;
  return `${agentsRefused(facts)} ${describeRemedy(remedy, facts)}`;
}

/** agentContextNote in the desktop window's log: the Model page has the note with the button that fixes it. */
export function agentContextNoteInWindow(facts: ContextFacts): string | null {
  return contextRemedy(facts, facts.agent.promptTokens) ? `${agentsRefused(facts)} The Model page says what makes room for them.` : null;
}

function agentsRefused(facts: ContextFacts): string {
  return (
    `The context is ${facts.contextSize} tokens per sequence; coding agents such as Claude Code and Codex send up to about ` +
    `${about(facts.agent.promptTokens)} tokens (with this model's tokenizer) before the first answer, so they will be refused.`
  );
}

/**
 * A prompt longer than the context: a 400 that says what would take it (nothing is truncated silently).
 * `readUpTo`: the prompt was read only this far, and promptTokens is estimated from its length.
 */
export function contextTooLong(facts: ContextFacts, promptTokens: number, readUpTo?: number): AppError {
  const prompt = readUpTo === undefined ? `is ${promptTokens} tokens` : `has more than ${readUpTo} tokens (about ${promptTokens}, by its length)`;
  const remedy = contextRemedy(facts, promptTokens);
  const advice = remedy
    ? `Nothing is truncated: shorten the conversation${remedy.reason === "training" ? "" : ", or give the server a longer context"}. ${describeRemedy(remedy, facts)}`
    : "Nothing is truncated: shorten the conversation.";
  // svc_context goes out on the error body (the error bodies in server/http): the facts a client such
  // as the desktop window turns into its own words and buttons.
  const svcContext: ContextErrorFacts = { context_size: facts.contextSize, prompt_tokens: promptTokens, train_context_size: facts.trainContextSize, remedy };
  return new AppError("invalid_request", `This model's context is ${facts.contextSize} tokens per sequence, but the prompt ${prompt}. ${advice}`, {
    code: "context_length_exceeded",
    param: "messages",
    details: { context_size: facts.contextSize, prompt_tokens: promptTokens, svc_context: svcContext },
  });
}
