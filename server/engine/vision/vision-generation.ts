// Why one file (over 400 lines): runVisionGeneration is one state machine, the segments of one answer (its
// thought, its text, each call's name and arguments), whose phase, budget and output text every segment reads
// and moves; its prompt is vision-prompt.ts's.
// A request that carries images, generated on the vision engine: OUR chat wrapper renders the prompt (the
// images as markers, in place), the vision process reads it with the images and samples the answer, and the
// text it streams back is split here into reasoning and answer, with stop sequences matched on the visible
// answer only, as runGeneration does for text (the same TextTriggerMatcher). The reasoning budget and the
// answer's grammar work as there, in segments: a completion stops where the thought must close (its marker
// then follows it in the next one's prompt) or where the answer starts (written again under the grammar);
// llama.node's KV cache serves the repeated prefix. Tool calls go the same way: where the model writes the
// call's marker (or where the request forces a call) the completion stops, and the call's name and then its
// arguments are each a completion under their grammar (GrammarCache.toolGbnf), the chat format's fixed text
// between them written in by us, as runGeneration feeds it. What the vision path does not do (docs/api.md,
// "Images"): per-token probabilities (glassbox confidence is null).
import type { ChatWrapper, LlamaModel, Token } from "node-llama-cpp";
import { AppError } from "../../core/errors.js";
import type { ToolCall, ToolDefinition } from "../../core/inference.js";
import { isCompleteObject, MAX_TOOL_CALLS, newCallId, reasoningBudgetFor } from "../generation.js";
import type { ToolGbnf } from "../grammar-cache.js";
import type { PromptSyntax } from "../prompt.js";
import { TextTriggerMatcher } from "../text-matcher.js";
import type { EngineEvent, EngineOutcome, EngineRequest } from "../types.js";
import { VisionPromptTooLong, type VisionEngine } from "./vision-engine.js";
import type { VisionResult } from "./vision-protocol.js";
import { renderVisionPrompt } from "./vision-prompt.js";

export { hasImages } from "./vision-prompt.js";

export interface VisionGenerationSetup {
  model: LlamaModel;
  wrapper: ChatWrapper;
  syntax: PromptSyntax;
  vision: VisionEngine;
  request: EngineRequest;
  contextSize: number;
  /** Room the context keeps free past the answer (forced markers). */
  margin: number;
  tooLong: (promptTokens: number) => AppError;
  /** GBNF the answer must follow (json_object / json_schema output). */
  answerGrammar?: string;
  /** The request's callable tools' grammars (GrammarCache.toolGbnf); none: no calls. */
  toolGrammars?: ToolGbnf | null;
  signal: AbortSignal;
}

/** Exact prompt tokens of a request with images: the text's, and each image's share from its encoder. */
export async function countVisionTokens(setup: Pick<VisionGenerationSetup, "model" | "wrapper" | "vision" | "request">): Promise<number> {
  const { prompt, media } = renderVisionPrompt(setup.model, setup.wrapper, setup.request);
  return (await setup.vision.tokenize(prompt, media)).tokens;
}

type VisionPhase = "lead" | "reasoning" | "answer" | "tool_name" | "tool_args" | "after_tool";

export async function* runVisionGeneration(setup: VisionGenerationSetup): AsyncGenerator<EngineEvent, void, void> {
  const { request, syntax, signal, model } = setup;
  const call = setup.toolGrammars ? syntax.toolCall : null;
  const forcedTool = call && (request.toolChoice.type === "required" || request.toolChoice.type === "tool") ? request.toolChoice : null;
  /** Tokens as the text the vision process's tokenizer (it parses special tokens) reads back into them. */
  const textOf = (tokens: readonly Token[]) => model.detokenize(tokens, true);
  const tokenCount = (text: string) => model.tokenize(text, true).length;
  const rendered = renderVisionPrompt(model, setup.wrapper, request);
  const media = rendered.media;
  // Fast mode: the answer starts after an empty thought, closed, as non-thinking templates write it (Qwen3's),
  // unless the wrapper wrote one already: llama.node cannot ban the thought's opening token.
  const fastOpen = request.mode === "fast" ? syntax.thought : null;
  const prompt =
    fastOpen && !rendered.prompt.trimEnd().endsWith(fastOpen.close) ? `${rendered.prompt}${fastOpen.open}\n\n${fastOpen.close}\n\n` : rendered.prompt;
  // The prompt is read once, in the vision process: it checks the room, counts the images and says so first.
  const contextLimit = setup.contextSize - setup.margin;
  let maxTokens = Math.min(request.maxTokens ?? contextLimit, contextLimit);
  let imageTokens = 0;
  if (signal.aborted) return;

  const grammar = setup.answerGrammar;
  const thought = request.mode === "thinking" ? syntax.thought : null;
  // Fast mode: llama.node has no token bans (it reads no logit_bias), so a thought the model opens anyway is
  // skipped: the completion stops, and the next one starts after an empty thought, closed.
  const fastThought = request.mode === "fast" ? syntax.thought : null;
  // The reasoning budget closes the thought with the model's own marker, as runGeneration does: the
  // completion stops there and a second one continues after the marker (its prefix comes from the KV cache).
  // An answer that must be JSON or a call keeps room for it, as there.
  const budgetFor = (max: number) =>
    thought ? Math.min(reasoningBudgetFor(request.reasoningBudget, max, grammar !== undefined || forcedTool !== null), Math.max(0, max - 1)) : 0;
  let reasoningBudget = budgetFor(maxTokens);

  // Free answer text ends at a stop sequence, or where the model starts a call (when it may make one).
  const answerTriggers = [
    ...request.stopSequences.map((s) => ({ kind: "stop" as const, text: s })),
    ...(call && !forcedTool && grammar === undefined ? [{ kind: "tool" as const, text: call.trigger }] : []),
  ];
  const answerMatcher = new TextTriggerMatcher(answerTriggers);
  const closeMatcher = thought ? new TextTriggerMatcher([{ kind: "close" as const, text: thought.close }]) : null;
  const afterToolMatcher = call ? new TextTriggerMatcher([{ kind: "tool" as const, text: call.trigger }]) : null;
  /** Leading output not yet known to open a thought or not. */
  let lead = "";
  // Closures move it (openTool, enterForced): read through now() where the compiler would narrow it.
  let phase: VisionPhase = thought || fastThought ? "lead" : "answer";
  const now = (): VisionPhase => phase;
  let reasoning = "";
  let text = "";
  let reasoningTokens = 0;
  let leadTokens = 0;
  let stopSequence: string | null = null;
  let started = false;
  const events: EngineEvent[] = [];
  const toolCalls: ToolCall[] = [];
  /** The call whose arguments are being written. */
  let openCall: { tool: ToolDefinition; id: string } | null = null;
  /** This tool segment's output: the name, or the arguments. */
  let toolText = "";
  /** Output after the calls that is not another call: the turn is over, without it. */
  let callsOver = false;
  /** What this segment's completion should end for: a stop sequence, or the next segment. */
  let stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  /**
   * Set when the segment is stopped to go on differently: after the close marker, afresh under the grammar,
   * past a skipped thought, into a call the model started ("tool"), or into the call the request forces.
   */
  let next: "close" | "grammar" | "skip" | "tool" | "forced" | null = null;
  /** Where the answer begins: under the forced call, the grammar, or free. */
  const constrainedStart = (): "forced" | "grammar" | null => (forcedTool ? "forced" : grammar !== undefined ? "grammar" : null);

  const answer = (piece: string) => {
    if (stopSequence !== null || next === "tool" || piece === "") return;
    const match = answerTriggers.length > 0 ? answerMatcher.push(piece) : { emit: piece, hit: null };
    let emit = match.emit;
    if (text === "") emit = emit.replace(/^\s+/, "");
    if (emit) {
      text += emit;
      events.push({ type: "text.delta", text: emit });
    }
    if (match.hit?.kind === "stop") {
      stopSequence = match.hit.trigger;
      stop.abort();
    } else if (match.hit?.kind === "tool") {
      next = "tool";
      stop.abort();
    }
  };
  const think = (piece: string) => {
    const match = closeMatcher!.push(piece);
    let emit = match.emit;
    if (reasoning === "") emit = emit.replace(/^\s+/, "");
    if (emit) {
      reasoning += emit;
      events.push({ type: "reasoning.delta", text: emit });
    }
    if (match.hit) {
      phase = "answer";
      // The answer's grammar, or the forced call, applies from here: the rest is written again under it.
      const constrained = constrainedStart();
      if (constrained !== null) {
        next = constrained;
        stop.abort();
      } else answer(match.rest);
    }
  };

  try {
    /** The model's output so far as it wrote it (what a continuation's prompt repeats). */
    let written = "";
    let completionTokens = 0;
    let first: VisionResult | null = null;
    let last: VisionResult | null = null;
    /** Where the answer under a constraint starts: after the thought's close, or at the start. */
    const afterThought = () => {
      const cut = thought ? written.lastIndexOf(thought.close) : -1;
      return cut >= 0 ? written.slice(0, cut + thought!.close.length) : "";
    };
    /** Forced text goes into the output when there is room for it and a token after it. */
    const force = (piece: string): boolean => {
      const tokens = tokenCount(piece);
      if (completionTokens + tokens + 1 > maxTokens) return false;
      written += piece;
      completionTokens += tokens;
      return true;
    };
    /** A call's name is known (its start is told): its arguments come next. */
    const openTool = (tool: ToolDefinition) => {
      const id = newCallId();
      openCall = { tool, id };
      events.push({ type: "tool_call.start", index: toolCalls.length, id, name: tool.name });
      toolText = "";
      phase = "tool_args";
    };
    /**
     * The answer starts with the forced call: its whole prefix, and a named tool's name and the text before
     * its arguments. False, with nothing of the call started, when that does not fit the budget.
     */
    const enterForced = (): boolean => {
      written = afterThought();
      phase = "tool_name";
      toolText = "";
      const choice = forcedTool!;
      const named = choice.type === "tool" ? request.tools.find((t) => t.name === choice.name)! : null;
      if (!force(textOf(call!.prefix) + (named ? named.name + textOf(call!.paramsPrefix) : ""))) return false;
      if (named) openTool(named);
      return true;
    };
    let segmentPrompt = prompt;
    let budgetOut = false;
    if (phase === "answer" && forcedTool) {
      if (!enterForced()) budgetOut = true;
      segmentPrompt = prompt + written;
    }
    // The reasoning, the answer after its close (under the grammar, if any), and per call its name, its
    // arguments and what follows it.
    for (let segment = 0; !budgetOut && segment < 4 + 3 * MAX_TOOL_CALLS; segment++) {
      const left = maxTokens - completionTokens;
      const segmentGrammar =
        phase === "tool_name"
          ? setup.toolGrammars!.names
          : now() === "tool_args"
            ? setup.toolGrammars!.arguments.get(openCall!.tool.name)!.gbnf
            : grammar !== undefined && (phase === "answer" || !thought)
              ? grammar
              : undefined;
      let result: VisionResult | null = null;
      /** This segment's streamed pieces taken as output (about one token each). */
      let kept = 0;
      for await (const step of setup.vision.complete(
        {
          prompt: segmentPrompt,
          media,
          maxTokens: left,
          contextLimit,
          temperature: request.sampling.temperature ?? 0.7,
          topP: request.sampling.topP ?? 0.95,
          topK: request.sampling.topK ?? 40,
          seed: request.sampling.seed ?? 0,
          frequencyPenalty: request.sampling.frequencyPenalty ?? 0,
          presencePenalty: request.sampling.presencePenalty ?? 0,
          ...(segmentGrammar !== undefined ? { grammar: segmentGrammar } : {}),
        },
        stop.signal,
      )) {
        if ("prompt" in step) {
          if (!started) {
            // The room the context leaves bounds the answer (and the thought within it).
            maxTokens = Math.min(maxTokens, step.prompt.maxTokens);
            reasoningBudget = budgetFor(maxTokens);
            imageTokens = step.prompt.imageTokens.reduce((a, b) => a + b, 0);
            yield { type: "start", mode: request.mode, promptTokens: step.prompt.tokens, cachedTokens: step.prompt.cached };
            yield* events.splice(0);
          }
          started = true;
          continue;
        }
        if ("result" in step) {
          result = step.result;
          break;
        }
        // Tokens that arrive after this segment was stopped are not part of the output.
        if (stop.signal.aborted) continue;
        written += step.text;
        kept++;
        if (phase === "lead") {
          lead += step.text;
          leadTokens++;
          const opener = (thought ?? fastThought)!.open;
          const trimmed = lead.trimStart();
          if (trimmed.length >= opener.length || !opener.startsWith(trimmed)) {
            if (fastThought && trimmed.startsWith(opener)) {
              // Watched again in the next segment: a model that opens a thought after every newline would.
              lead = "";
              leadTokens = 0;
              next = "skip";
              stop.abort();
            } else if (trimmed.startsWith(opener)) {
              phase = "reasoning";
              reasoningTokens += leadTokens;
              think(trimmed.slice(thought!.open.length));
            } else if (constrainedStart() !== null) {
              // No thought: the answer starts now, under its grammar or as the forced call, written afresh.
              phase = "answer";
              written = "";
              next = constrainedStart();
              stop.abort();
            } else {
              phase = "answer";
              answer(lead);
            }
          }
        } else if (phase === "reasoning") {
          reasoningTokens++;
          think(step.text);
          if (phase === "reasoning" && reasoningTokens >= reasoningBudget) {
            next = "close";
            stop.abort();
          }
        } else if (phase === "tool_name") toolText += step.text;
        else if (now() === "tool_args") {
          toolText += step.text;
          if (step.text) events.push({ type: "tool_call.delta", index: toolCalls.length, argumentsDelta: step.text });
        } else if (phase === "after_tool") {
          const m = afterToolMatcher!.push(step.text);
          if (m.hit) {
            next = "tool";
            stop.abort();
          } else if (m.emit.trim() !== "") {
            // Text after the calls is not part of this protocol: the turn is over.
            callsOver = true;
            stop.abort();
          }
        } else answer(step.text);
        if (events.length > 0 && started) yield* events.splice(0);
      }
      if (signal.aborted) return;
      if (!result) throw new AppError("unavailable", "The vision engine ended without a result.", { code: "vision_failed", retryAfter: 5 });
      first ??= result;
      last = result;
      const going = next;
      // Output is what was kept: a skipped thought, and a free-running answer written again under the
      // grammar or as the forced call, are not (the tokens the model wrote before the stop took effect are not either).
      const rewritten = going === "grammar" || going === "forced";
      completionTokens += going === "skip" ? 0 : rewritten ? Math.min(kept, result.completionTokens) : going === "close" || going === "tool" || callsOver ? kept : result.completionTokens;
      next = null;
      if (stopSequence !== null || callsOver) break;
      if (going === null) {
        // The segment ran to its end: the model's end of turn, the budget, or the end of a grammar.
        if (phase === "tool_name" && result.endOfTurn) {
          const name = toolText.trim();
          const tool = request.tools.find((t) => t.name === name);
          // Only reachable if the grammar was bypassed; end the turn rather than invent a tool.
          if (!tool) break;
          openTool(tool);
          if (!force(textOf(call!.paramsPrefix))) break;
        } else if (now() === "tool_args" && (result.endOfTurn || isCompleteObject(toolText))) {
          // Ended by its grammar, or out of budget just after the object closed: the call is complete.
          const args = toolText.trim() || "{}";
          events.push({ type: "tool_call.end", index: toolCalls.length, arguments: args });
          toolCalls.push({ id: openCall!.id, name: openCall!.tool.name, arguments: args });
          openCall = null;
          if (!request.parallelToolCalls || toolCalls.length >= MAX_TOOL_CALLS || !force(textOf(call!.suffix))) break;
          phase = "after_tool";
        } else break;
      } else if (going === "close") {
        // The budget is spent: the thought ends with the model's own marker (counted as output).
        const held = closeMatcher!.flush();
        if (held) (reasoning += held), events.push({ type: "reasoning.delta", text: held });
        written += thought!.close;
        completionTokens += 1;
        phase = "answer";
        if (forcedTool && !enterForced()) break;
      } else if (going === "skip") {
        // The thought the model opened ends at once: its marker and the close, nothing between.
        written = written.slice(0, written.lastIndexOf(fastThought!.open)) + fastThought!.open + fastThought!.close;
      } else if (going === "grammar") {
        // Written again under the grammar: the tokens of the free-running attempt after the thought are not output.
        written = afterThought();
      } else if (going === "forced") {
        if (!enterForced()) break;
      } else if (going === "tool") {
        // The model started a call: its marker stays, the rest of the call's prefix follows, then the name.
        const at = written.lastIndexOf(call!.trigger);
        if (at < 0) break;
        written = written.slice(0, at + call!.trigger.length);
        phase = "tool_name";
        toolText = "";
        if (!force(textOf(call!.prefixRest))) break;
      }
      if (maxTokens - completionTokens < 1) break;
      segmentPrompt = prompt + written;
      stop = new AbortController();
    }
    const result = last;
    // Text held back as a possible stop sequence's start is answer text after all.
    if (phase === "lead") answer(lead);
    else if (phase === "reasoning") {
      const held = closeMatcher!.flush();
      if (held) (reasoning += held), events.push({ type: "reasoning.delta", text: held });
    }
    if (stopSequence === null && phase === "answer") {
      const held = answerMatcher.flush();
      if (held) (text += held), events.push({ type: "text.delta", text: held });
    }
    // No completion ran (a forced call's prefix did not fit the budget): the prompt is counted, not read.
    const counted = first ? null : await setup.vision.tokenize(prompt, media);
    if (counted) imageTokens = counted.imageTokens.reduce((a, b) => a + b, 0);
    const promptTokens = first?.promptTokens ?? counted!.tokens;
    const cachedTokens = first ? first.promptTokens - first.evaluatedTokens : 0;
    if (!started) yield { type: "start", mode: request.mode, promptTokens, cachedTokens };
    yield* events.splice(0);
    const incomplete = openCall as { tool: ToolDefinition; id: string } | null;
    const stopReason: EngineOutcome["stopReason"] =
      stopSequence !== null
        ? "stop_sequence"
        : incomplete !== null || phase === "tool_name"
          ? "max_tokens"
          : toolCalls.length > 0
            ? "tool_calls"
            : result?.endOfTurn
              ? "end_turn"
              : "max_tokens";
    const outcome: EngineOutcome = {
      mode: request.mode,
      text,
      reasoning,
      toolCalls,
      ...(incomplete !== null ? { incompleteToolCall: { id: incomplete.id, name: incomplete.tool.name, arguments: toolText } } : {}),
      stopReason,
      stopSequence,
      usage: {
        promptTokens,
        cachedTokens,
        completionTokens: Math.min(completionTokens, maxTokens),
        reasoningTokens: Math.min(reasoningTokens, completionTokens),
      },
      vision: { images: media.length, imageTokens },
    };
    yield { type: "done", outcome };
  } catch (err) {
    if (err instanceof VisionPromptTooLong) throw setup.tooLong(err.promptTokens);
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
