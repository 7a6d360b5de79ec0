// One generation on one sequence, as a state machine over sampled tokens:
//
//   reasoning ──(close marker, budget spent, or end of turn)──► answer ──(end of turn / stop / max)──► done
//                                                                  │ tool-call marker, or a forced call
//                                                                  ▼
//                                            tool name ──► tool arguments ──► after tool ──► (another call | done)
//
// Everything the library would do too eagerly is done here instead: stop sequences are matched on the
// visible answer only, grammars constrain only the answer or the call being written, and the reasoning
// budget closes the thought by forcing the model's own closing marker.
//
// Output never exceeds the completion budget: forced tokens (markers, a forced call's prefix, a call's
// suffix) count as output, and are only fed when they fit with room for at least one sampled token after
// them; otherwise generation ends there without them. A call cut by the budget is reported as incomplete.
//
// By job: this file is the phases and the budgets; how each phase samples (grammar, bans, the UTF-8 guard,
// penalties, which phases are scored) is generation-sampling.ts; what is shown (the answer through the stop
// and tool-call matcher, the thought, the probabilities released with their text) is generation-text.ts; the
// tokens come from the `evaluate` the engine gives (its slot loop, or an upstream's completion).
import type { LlamaModel, SequenceEvaluateOptions, Token } from "node-llama-cpp";
import { newId } from "../core/ids.js";
import type { TokenLogprob, ToolCall } from "../core/inference.js";
import { PhaseSampling, type CompiledGrammars, type Phase, type PhaseConstraints } from "./generation-sampling.js";
import { VisibleText } from "./generation-text.js";
import type { PromptSyntax } from "./prompt.js";
import { TextTriggerMatcher } from "./text-matcher.js";
import { TokenTextDecoder } from "./token-decoder.js";
import type { SampledToken, TokenMetadata } from "./token-probabilities.js";
import type { EngineEvent, EngineOutcome, EngineRequest } from "./types.js";

export type { CompiledGrammars, PhaseConstraints } from "./generation-sampling.js";

export interface GenerationSetup {
  model: LlamaModel;
  syntax: PromptSyntax;
  request: EngineRequest;
  promptTokens: Token[];
  /** Prompt tokens served from a cache (the prefix cache, or a warm start's restore): usage reports them. */
  cachedTokens: number;
  /** Prompt tokens the sequence holds already (cachedTokens, and any read just before); default cachedTokens. */
  heldTokens?: number;
  /** Completion tokens allowed: max_tokens, and what the context has room for. */
  maxCompletionTokens: number;
  grammars: CompiledGrammars;
  signal: AbortSignal;
  /**
   * Starts an evaluation on the sequence: feeds the tokens, then yields sampled tokens (the context's slot
   * loop, slot-loop.ts). `more` says, when a token has just been sampled, how many more tokens the generation
   * can take after it (its budgets; 0: none): the loop decodes tokens ahead only within it.
   */
  evaluate: (tokens: Token[], metadata: TokenMetadata, options: SequenceEvaluateOptions, more: () => number, constraints: PhaseConstraints) => AsyncIterable<SampledToken>;
}

/** Most parallel calls one turn may make; a loop guard, far above what clients send. */
export const MAX_TOOL_CALLS = 32;
/** Answer tokens kept back from the reasoning budget when the answer must be complete JSON or a call. */
const CONSTRAINED_ANSWER_RESERVE = 512;

/**
 * The thought's share of a budget of `maxCompletion` tokens: what the request asked for, less the room an
 * answer that must be JSON or a call keeps (`constrained`). Both engines' paths (and the vision path) use it.
 */
export function reasoningBudgetFor(asked: number, maxCompletion: number, constrained: boolean): number {
  return Math.max(0, Math.min(asked, constrained ? maxCompletion - Math.min(CONSTRAINED_ANSWER_RESERVE, Math.floor(maxCompletion / 2)) : maxCompletion));
}

type StopKind = EngineOutcome["stopReason"];

export async function* runGeneration(setup: GenerationSetup): AsyncGenerator<EngineEvent, void, void> {
  const { model, syntax, request, grammars, signal } = setup;
  const decoder = new TokenTextDecoder(model);
  const thought = request.mode === "thinking" ? syntax.thought : null;
  const toolsCallable = request.tools.length > 0 && request.toolChoice.type !== "none" && syntax.toolCall !== null;
  const forcedTool =
    toolsCallable && (request.toolChoice.type === "required" || request.toolChoice.type === "tool") ? request.toolChoice : null;
  const constrainedAnswer = grammars.answer !== null || forcedTool !== null;

  const maxCompletion = setup.maxCompletionTokens;
  const reasoningBudget = reasoningBudgetFor(request.reasoningBudget, maxCompletion, constrainedAnswer);

  /** Output tokens fed or sampled so far. */
  let completion = 0;
  /** Forced tokens queued by the current step; counted only if they are fed. */
  let pending = 0;
  let reasoningTokens = 0;
  /** Speculation (slot-loop.ts): guessed tokens checked, and those of them the answer took. */
  let draftedTokens = 0;
  let acceptedDraftTokens = 0;
  const toolCalls: ToolCall[] = [];
  /** The call being written (its name known), until its arguments end. */
  let openCall: ToolCall | null = null;
  let toolText = "";

  const sampling = new PhaseSampling(model, syntax, request, grammars, toolsCallable);
  const visible = new VisibleText(model, Boolean(request.tokenProbabilities), {
    stopSequences: request.stopSequences,
    toolTrigger: toolsCallable && !grammars.answer ? syntax.toolCall!.trigger : null,
    thoughtClose: thought ? thought.close : null,
  });
  const afterToolMatcher = syntax.toolCall ? new TextTriggerMatcher([{ kind: "tool" as const, text: syntax.toolCall.trigger }]) : null;

  const tokensOf = (s: string): Token[] => model.tokenize(s, false);

  /** Room for `forced` more tokens and at least one sampled token after them. */
  const fits = (forced: number) => completion + pending + forced < maxCompletion;

  /**
   * Sets up the answer: a forced call starts right away; otherwise free text or the JSON grammar. Null when a
   * forced call's prefix does not fit the budget: the call does not start at all.
   */
  function enterAnswer(feed: Token[], events: EngineEvent[]): Phase | null {
    if (forcedTool && toolCalls.length === 0) {
      const call = syntax.toolCall!;
      if (forcedTool.type === "tool") {
        const tool = request.tools.find((t) => t.name === forcedTool.name)!;
        const forced = [...call.prefix, ...tokensOf(tool.name), ...call.paramsPrefix];
        if (!fits(forced.length)) return null;
        const id = newCallId();
        feed.push(...forced);
        pending += forced.length;
        toolText = "";
        openCall = { id, name: tool.name, arguments: "" };
        events.push({ type: "tool_call.start", index: toolCalls.length, id, name: tool.name });
        return { kind: "tool_args", tool, id };
      }
      if (!fits(call.prefix.length)) return null;
      feed.push(...call.prefix);
      pending += call.prefix.length;
      toolText = "";
      return { kind: "tool_name" };
    }
    return { kind: "answer" };
  }

  let started = false;
  // Held in an object: closures set it, and the compiler must not narrow it away.
  const end: { stop: { kind: StopKind; sequence: string | null } | null } = { stop: null };
  const finish = (kind: StopKind, sequence: string | null = null) => {
    end.stop = { kind, sequence };
  };

  let phase: Phase = { kind: "answer" };
  let feed: Token[] = setup.promptTokens.slice(setup.heldTokens ?? setup.cachedTokens);
  const startEvents: EngineEvent[] = [];
  if (thought && reasoningBudget > 0 && fits(thought.openTokens.length)) {
    feed.push(...thought.openTokens);
    pending += thought.openTokens.length;
    phase = { kind: "reasoning" };
  } else {
    const entered = enterAnswer(feed, startEvents);
    if (entered === null) finish("max_tokens");
    else phase = entered;
  }
  completion += pending;
  pending = 0;

  while (end.stop === null && maxCompletion > 0) {
    if (signal.aborted) return;
    const metadata = sampling.metadataFor(phase);
    const constraints = sampling.constraintsFor(phase);
    const iterator = setup.evaluate(
      feed,
      metadata,
      sampling.optionsFor(phase, constraints),
      () => Math.min(maxCompletion - (completion + pending + 1), phase.kind === "reasoning" ? reasoningBudget - reasoningTokens - 1 : Number.POSITIVE_INFINITY),
      constraints,
    );
    const nextFeed: Token[] = [];
    let nextPhase: Phase | null = null;
    let ended = true;

    for await (const sampled of iterator) {
      const token = sampled.token;
      if (signal.aborted) return;
      if (sampled.speculation) {
        draftedTokens += sampled.speculation.drafted;
        if (sampled.speculation.accepted) acceptedDraftTokens++;
      }
      if (!started) {
        started = true;
        yield { type: "start", mode: request.mode, promptTokens: setup.promptTokens.length, cachedTokens: setup.cachedTokens };
        for (const e of startEvents) yield e;
      }
      const events: EngineEvent[] = [];
      pending = 0;
      const eog = model.isEogToken(token);
      if (!eog) {
        completion += 1;
        sampling.sampled(token);
      }
      const answerEntry = sampling.scored(metadata) && !eog ? visible.score(sampled, request.sampling.temperature, sampling.topN, phase.kind === "answer") : null;

      switch (phase.kind) {
        case "reasoning": {
          if (eog) {
            // The model ended its turn inside the thought: close it and let it answer.
            nextFeed.push(...thought!.closeTokens);
            pending += thought!.closeTokens.length;
            nextPhase = enterAnswer(nextFeed, events);
            if (nextPhase === null) finish("max_tokens");
            break;
          }
          const m = visible.thought(decoder.push(token));
          events.push(...m.events);
          if (m.closed) {
            nextFeed.push(token);
            nextPhase = enterAnswer(nextFeed, events);
            if (nextPhase === null) finish("max_tokens");
            else if (nextPhase.kind === "answer") events.push(...answerText(m.rest));
            break;
          }
          reasoningTokens += 1;
          if (reasoningTokens >= reasoningBudget) {
            events.push(...visible.closeThought());
            nextFeed.push(token, ...thought!.closeTokens);
            pending += thought!.closeTokens.length;
            nextPhase = enterAnswer(nextFeed, events);
            if (nextPhase === null) finish("max_tokens");
          }
          break;
        }
        case "answer": {
          if (eog) {
            events.push(...visible.flushAnswer());
            finish("end_turn");
            break;
          }
          events.push(...answerText(decoder.push(token), answerEntry, token, nextFeed));
          if (end.stop === null && nextFeed.length > 0) nextPhase = { kind: "tool_name" };
          break;
        }
        case "tool_name": {
          if (eog) {
            const name = toolText.trim();
            const tool = request.tools.find((t) => t.name === name);
            if (!tool) {
              // Only reachable if the grammar was bypassed; end the turn rather than invent a tool.
              finish(toolCalls.length > 0 ? "tool_calls" : "end_turn");
              break;
            }
            const id = newCallId();
            openCall = { id, name, arguments: "" };
            events.push({ type: "tool_call.start", index: toolCalls.length, id, name });
            const call = syntax.toolCall!;
            nextFeed.push(...call.paramsPrefix);
            pending += call.paramsPrefix.length;
            toolText = "";
            nextPhase = { kind: "tool_args", tool, id };
            break;
          }
          toolText += decoder.push(token);
          break;
        }
        case "tool_args": {
          if (eog) {
            const args = toolText.trim() || "{}";
            events.push({ type: "tool_call.end", index: toolCalls.length, arguments: args });
            toolCalls.push({ id: phase.id, name: phase.tool.name, arguments: args });
            openCall = null;
            const call = syntax.toolCall!;
            if (!request.parallelToolCalls || toolCalls.length >= MAX_TOOL_CALLS) {
              finish("tool_calls");
              break;
            }
            nextFeed.push(...call.suffix);
            pending += call.suffix.length;
            decoder.reset(call.suffix);
            nextPhase = { kind: "after_tool" };
            break;
          }
          const piece = decoder.push(token);
          toolText += piece;
          if (openCall) openCall.arguments = toolText;
          if (piece) events.push({ type: "tool_call.delta", index: toolCalls.length, argumentsDelta: piece });
          break;
        }
        case "after_tool": {
          if (eog) {
            finish("tool_calls");
            break;
          }
          const m = afterToolMatcher!.push(decoder.push(token));
          if (m.hit) {
            nextFeed.push(token, ...syntax.toolCall!.prefixRest);
            pending += syntax.toolCall!.prefixRest.length;
            toolText = "";
            nextPhase = { kind: "tool_name" };
          } else if (m.emit.trim() !== "") {
            // Text after the calls is not part of this protocol: the turn is over.
            finish("tool_calls");
          }
          break;
        }
      }

      if (end.stop === null) {
        if (completion + pending >= maxCompletion) {
          // No room to sample after what is queued: stop here, without feeding (or counting) forced tokens.
          if (phase.kind === "answer") events.push(...visible.flushAnswer());
          if (phase.kind === "tool_args" && nextPhase === null && isCompleteObject(toolText)) {
            // The arguments' last token closed the object: the call is complete, only its end marker is missing.
            const args = toolText.trim();
            events.push({ type: "tool_call.end", index: toolCalls.length, arguments: args });
            toolCalls.push({ id: phase.id, name: phase.tool.name, arguments: args });
            openCall = null;
          }
          const callsDone = phase.kind === "after_tool" || nextPhase?.kind === "after_tool" || (phase.kind === "tool_args" && openCall === null);
          finish(callsDone ? "tool_calls" : "max_tokens");
        } else {
          completion += pending;
        }
      }
      for (const e of events) yield e;
      if (end.stop !== null) break;
      if (nextPhase !== null) {
        decoder.reset(nextFeed);
        phase = nextPhase;
        feed = nextFeed;
        ended = false;
        break;
      }
    }
    if (end.stop === null && ended) finish("end_turn");
  }

  if (signal.aborted) return;
  if (!started) yield { type: "start", mode: request.mode, promptTokens: setup.promptTokens.length, cachedTokens: setup.cachedTokens };
  // Tokens whose text was all whitespace before the answer began: reported, with no text of their own.
  const unsent = visible.takeReleased();
  if (unsent.length > 0) yield { type: "text.delta", text: "", logprobs: unsent };
  const final = end.stop as { kind: StopKind; sequence: string | null };
  const stopReason: StopKind = final.kind === "end_turn" && toolCalls.length > 0 ? "tool_calls" : final.kind;
  yield {
    type: "done",
    outcome: {
      mode: request.mode,
      text: visible.text,
      reasoning: visible.reasoning,
      toolCalls,
      ...(openCall !== null && stopReason === "max_tokens" ? { incompleteToolCall: { ...(openCall as ToolCall) } } : {}),
      stopReason,
      stopSequence: final.sequence,
      usage: {
        promptTokens: setup.promptTokens.length,
        cachedTokens: setup.cachedTokens,
        completionTokens: completion,
        reasoningTokens,
        draftedTokens,
        acceptedDraftTokens,
      },
      ...(request.tokenProbabilities ? { logprobs: visible.logprobs, scored: visible.scored } : {}),
    },
  };

  /**
   * Answer text through the stop-sequence and tool-call matcher (generation-text.ts). A stop sequence ends
   * the answer; on a tool-call marker the sampled token and the rest of the call prefix are queued in `nextFeed`.
   */
  function answerText(piece: string, entry: TokenLogprob | null = null, token?: Token, nextFeed?: Token[]): EngineEvent[] {
    const m = visible.answer(piece, entry);
    if (m.hit?.kind === "stop") {
      finish("stop_sequence", m.hit.trigger);
    } else if (m.hit?.kind === "tool" && token !== undefined && nextFeed !== undefined) {
      nextFeed.push(token, ...syntax.toolCall!.prefixRest);
      pending += syntax.toolCall!.prefixRest.length;
      toolText = "";
    }
    return m.events;
  }
}

/** Grammar-constrained arguments are complete once they parse: nothing but whitespace can follow an object. */
export function isCompleteObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

export function newCallId(): string {
  return newId("call_", 24);
}
