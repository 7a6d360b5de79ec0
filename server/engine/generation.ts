// Why one file (over 400 lines): runGeneration is one state machine in one async generator; its phases
// (reasoning, answer, tool name, tool arguments) share the generator's local state (budgets, matchers, bans,
// the UTF-8 guard, pending log-probabilities) token by token, so a split would turn that state into an
// object passed between files without separating any job.
//
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
import {
  LlamaGrammarEvaluationState,
  TokenBias,
  type LlamaGrammar,
  type LlamaModel,
  type SequenceEvaluateOptions,
  type Token,
} from "node-llama-cpp";
import { newId } from "../core/ids.js";
import type { TokenLogprob, ToolCall, ToolDefinition } from "../core/inference.js";
import type { PromptSyntax } from "./prompt.js";
import { TextTriggerMatcher } from "./text-matcher.js";
import { TokenTextDecoder } from "./token-decoder.js";
import { metadataFor, scoreToken, type SampledToken, type TokenMetadata } from "./token-probabilities.js";
import { Utf8State, Utf8TokenGuard } from "./utf8-guard.js";
import type { EngineEvent, EngineOutcome, EngineRequest, ScoredToken } from "./types.js";

export interface CompiledGrammars {
  /** Grammar for the answer (json_object / json_schema output), if any. */
  answer: LlamaGrammar | null;
  /** Grammar choosing among the callable tool names. */
  toolNames: LlamaGrammar | null;
  /** Grammar for each tool's arguments, by name. */
  toolArguments: Map<string, LlamaGrammar>;
}

/**
 * What constrains one phase's sampling, besides what SequenceEvaluateOptions carries (the grammar state and
 * token bias there are node-llama-cpp objects): the grammar and the tokens banned, for engines that sample
 * elsewhere (upstream-engine.ts sends them to an inference server).
 */
export interface PhaseConstraints {
  grammar: LlamaGrammar | null;
  banned: ReadonlySet<Token>;
}

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
const MAX_TOOL_CALLS = 32;
/** Answer tokens kept back from the reasoning budget when the answer must be complete JSON or a call. */
const CONSTRAINED_ANSWER_RESERVE = 512;

type Phase =
  | { kind: "reasoning" }
  | { kind: "answer" }
  | { kind: "tool_name" }
  | { kind: "tool_args"; tool: ToolDefinition; id: string }
  | { kind: "after_tool" };

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
  const reasoningBudget = Math.max(
    0,
    Math.min(
      request.reasoningBudget,
      constrainedAnswer ? maxCompletion - Math.min(CONSTRAINED_ANSWER_RESERVE, Math.floor(maxCompletion / 2)) : maxCompletion,
    ),
  );

  /** Output tokens fed or sampled so far. */
  let completion = 0;
  /** Forced tokens queued by the current step; counted only if they are fed. */
  let pending = 0;
  let reasoningTokens = 0;
  /** Speculation (slot-loop.ts): guessed tokens checked, and those of them the answer took. */
  let draftedTokens = 0;
  let acceptedDraftTokens = 0;
  let reasoning = "";
  let text = "";
  let textStarted = false;
  let reasoningWhitespace = "";
  const toolCalls: ToolCall[] = [];
  /** The call being written (its name known), until its arguments end. */
  let openCall: ToolCall | null = null;
  let toolText = "";
  const punish: Token[] = [];

  // Token probabilities (only when the request asks): scored answer and tool tokens, and the visible
  // answer's tokens, each released to a text.delta once the text it completes has been emitted.
  const probe = request.tokenProbabilities;
  const topN = probe ? Math.max(0, Math.min(20, probe.top)) : 0;
  const scored: ScoredToken[] = [];
  const contentLogprobs: TokenLogprob[] = [];
  /** Answer tokens waiting for their text to be emitted, with where their text ends in the raw answer. */
  const unreleased: Array<{ entry: TokenLogprob; end: number }> = [];
  /** Entries whose text has been emitted, waiting for the next text.delta. */
  let released: TokenLogprob[] = [];
  /** Raw answer characters pushed into the stop matcher, and emitted by it. */
  let answerIn = 0;
  let answerOut = 0;
  const pieceOf = (token: Token) => model.detokenize([token], false);
  const describe = (token: Token, logprob: number) => {
    // Special tokens (an alternative may be the end of the turn) are shown as written, e.g. <|im_end|>.
    const text = model.detokenize([token], true);
    return { token: text, bytes: [...Buffer.from(text, "utf8")], logprob };
  };
  const releaseUpTo = (out: number) => {
    while (unreleased.length > 0 && unreleased[0]!.end <= out) released.push(unreleased.shift()!.entry);
  };

  const stopTriggers = request.stopSequences.map((s) => ({ kind: "stop" as const, text: s }));
  const answerMatcher = new TextTriggerMatcher<"stop" | "tool">([
    ...stopTriggers,
    ...(toolsCallable && !grammars.answer ? [{ kind: "tool" as const, text: syntax.toolCall!.trigger }] : []),
  ]);
  const reasoningMatcher = thought ? new TextTriggerMatcher([{ kind: "close" as const, text: thought.close }]) : null;
  const afterToolMatcher = syntax.toolCall ? new TextTriggerMatcher([{ kind: "tool" as const, text: syntax.toolCall.trigger }]) : null;

  const banned = new Set<Token>(syntax.thought?.banTokens ?? []);
  const bannedOutsideCalls = new Set<Token>(banned);
  if (!toolsCallable) for (const t of syntax.toolCall?.triggerTokens ?? []) bannedOutsideCalls.add(t);

  function biasFor(tokens: Set<Token>): TokenBias | undefined {
    if (tokens.size === 0) return undefined;
    const bias = new TokenBias(model.tokenizer);
    for (const t of tokens) bias.set(t, "never");
    return bias;
  }
  const biasAll = biasFor(banned);
  const biasText = biasFor(bannedOutsideCalls);

  // Grammar phases sample only well-formed UTF-8 (see utf8-guard.ts): the bans follow the bytes so far.
  // Held in an object: optionsFor sets it, and the compiler must not narrow it away.
  const utf8: { guard: Utf8TokenGuard | null; state: Utf8State } = { guard: null, state: Utf8State.Boundary };
  const guardedBiases = new Map<string, TokenBias>();
  function guardedBias(base: Set<Token>, key: string): () => TokenBias {
    return () => {
      const id = `${key}:${utf8.state}`;
      let bias = guardedBiases.get(id);
      if (bias === undefined) {
        bias = new TokenBias(model.tokenizer);
        for (const t of base) bias.set(t, "never");
        for (const t of utf8.guard!.banned(utf8.state)) bias.set(t, "never");
        guardedBiases.set(id, bias);
      }
      return bias;
    };
  }

  const sampling = request.sampling;
  const penalties =
    (sampling.frequencyPenalty ?? 0) !== 0 || (sampling.presencePenalty ?? 0) !== 0
      ? {
          punishTokens: () => punish.slice(-256),
          maxPunishTokens: 256,
          penalty: 1,
          frequencyPenalty: sampling.frequencyPenalty ?? 0,
          presencePenalty: sampling.presencePenalty ?? 0,
        }
      : undefined;

  function constraintsFor(phase: Phase): PhaseConstraints {
    let grammar: LlamaGrammar | null = null;
    if (phase.kind === "answer") grammar = grammars.answer;
    else if (phase.kind === "tool_name") grammar = grammars.toolNames;
    else if (phase.kind === "tool_args") grammar = grammars.toolArguments.get(phase.tool.name) ?? null;
    const text = phase.kind === "answer" || phase.kind === "reasoning";
    return { grammar, banned: text ? bannedOutsideCalls : banned };
  }

  function optionsFor(phase: Phase, { grammar }: PhaseConstraints): SequenceEvaluateOptions {
    const text = phase.kind === "answer" || phase.kind === "reasoning";
    utf8.guard = grammar ? Utf8TokenGuard.for(model) : null;
    utf8.state = Utf8State.Boundary;
    return {
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: sampling.topK,
      seed: sampling.seed,
      repeatPenalty: penalties,
      tokenBias: utf8.guard ? guardedBias(text ? bannedOutsideCalls : banned, text ? "text" : "all") : text ? biasText : biasAll,
      grammarEvaluationState: grammar ? new LlamaGrammarEvaluationState({ model, grammar }) : undefined,
      yieldEogToken: true,
    };
  }

  /** Probabilities are asked for in the answer and tool-call phases only: reasoning is not scored. */
  const noMetadata: TokenMetadata = {};
  const scoringMetadata: TokenMetadata = probe ? metadataFor(topN, sampling.temperature) : noMetadata;
  const metadataFor_ = (phase: Phase): TokenMetadata =>
    probe && (phase.kind === "answer" || phase.kind === "tool_name" || phase.kind === "tool_args") ? scoringMetadata : noMetadata;

  const emitText = (chunk: string): EngineEvent[] => {
    if (probe) {
      answerOut += chunk.length;
      releaseUpTo(answerOut);
    }
    if (!textStarted) {
      chunk = chunk.trimStart();
      if (chunk === "") return [];
      textStarted = true;
    }
    if (chunk === "") return [];
    text += chunk;
    if (released.length === 0) return [{ type: "text.delta", text: chunk }];
    const logprobs = released;
    released = [];
    contentLogprobs.push(...logprobs);
    return [{ type: "text.delta", text: chunk, logprobs }];
  };

  const emitReasoning = (chunk: string): EngineEvent[] => {
    // Leading whitespace is dropped; trailing whitespace waits to see whether the thought goes on.
    let body = reasoningWhitespace + chunk;
    if (reasoning === "") body = body.trimStart();
    const trimmed = body.trimEnd();
    reasoningWhitespace = body.slice(trimmed.length);
    if (trimmed === "") return [];
    reasoning += trimmed;
    return [{ type: "reasoning.delta", text: trimmed }];
  };

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
    const metadata = metadataFor_(phase);
    const constraints = constraintsFor(phase);
    const iterator = setup.evaluate(
      feed,
      metadata,
      optionsFor(phase, constraints),
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
        punish.push(token);
        if (utf8.guard) utf8.state = utf8.guard.next(utf8.state, token);
      }
      let answerEntry: TokenLogprob | null = null;
      if (metadata !== noMetadata && !eog) {
        const score = scoreToken(sampled, sampling.temperature, topN);
        scored.push({ text: pieceOf(token), logprob: score.logprob });
        if (phase.kind === "answer")
          answerEntry = { ...describe(token, score.logprob), top: score.top.map((t) => describe(t.token, t.logprob)) };
      }

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
          const piece = decoder.push(token);
          const m = reasoningMatcher!.push(piece);
          events.push(...emitReasoning(m.emit));
          if (m.hit) {
            reasoningWhitespace = "";
            nextFeed.push(token);
            nextPhase = enterAnswer(nextFeed, events);
            if (nextPhase === null) finish("max_tokens");
            else if (nextPhase.kind === "answer") events.push(...emitAnswerText(m.rest));
            break;
          }
          reasoningTokens += 1;
          if (reasoningTokens >= reasoningBudget) {
            events.push(...emitReasoning(reasoningMatcher!.flush()));
            reasoningWhitespace = "";
            nextFeed.push(token, ...thought!.closeTokens);
            pending += thought!.closeTokens.length;
            nextPhase = enterAnswer(nextFeed, events);
            if (nextPhase === null) finish("max_tokens");
          }
          break;
        }
        case "answer": {
          if (eog) {
            events.push(...emitText(answerMatcher.flush()));
            finish("end_turn");
            break;
          }
          const piece = decoder.push(token);
          if (answerEntry) unreleased.push({ entry: answerEntry, end: answerIn + piece.length });
          events.push(...emitAnswerText(piece, token, nextFeed));
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
          if (phase.kind === "answer") events.push(...emitText(answerMatcher.flush()));
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
  if (released.length > 0) {
    // Tokens whose text was all whitespace before the answer began: reported, with no text of their own.
    contentLogprobs.push(...released);
    yield { type: "text.delta", text: "", logprobs: released };
    released = [];
  }
  const final = end.stop as { kind: StopKind; sequence: string | null };
  const stopReason: StopKind = final.kind === "end_turn" && toolCalls.length > 0 ? "tool_calls" : final.kind;
  yield {
    type: "done",
    outcome: {
      mode: request.mode,
      text,
      reasoning,
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
      ...(probe ? { logprobs: contentLogprobs, scored } : {}),
    },
  };

  /**
   * Runs answer text through the stop-sequence and tool-call matcher. On a tool-call marker the sampled
   * token and the rest of the call prefix are queued in `nextFeed`.
   */
  function emitAnswerText(piece: string, token?: Token, nextFeed?: Token[]): EngineEvent[] {
    answerIn += piece.length;
    const m = answerMatcher.push(piece);
    const out = emitText(m.emit);
    if (m.hit?.kind === "stop") {
      finish("stop_sequence", m.hit.trigger);
    } else if (m.hit?.kind === "tool" && token !== undefined && nextFeed !== undefined) {
      nextFeed.push(token, ...syntax.toolCall!.prefixRest);
      pending += syntax.toolCall!.prefixRest.length;
      toolText = "";
    }
    return out;
  }
}

/** Grammar-constrained arguments are complete once they parse: nothing but whitespace can follow an object. */
function isCompleteObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function newCallId(): string {
  return newId("call_", 24);
}
