// How each phase of a generation samples (generation.ts's state machine asks, phase by phase): which grammar
// constrains it, which tokens it may never sample (a thought's marker in fast mode, a call's marker where no
// tool may be called, and in grammar phases every token that would break the UTF-8 written so far), the
// request's sampling settings and penalties, and which phases are scored for log-probabilities.
import { LlamaGrammarEvaluationState, TokenBias, type LlamaGrammar, type LlamaModel, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import type { ToolDefinition } from "../core/inference.js";
import type { PromptSyntax } from "./prompt.js";
import { metadataFor, type TokenMetadata } from "./token-probabilities.js";
import type { EngineRequest } from "./types.js";
import type { LookaheadBias } from "./speculation.js";
import { Utf8State, Utf8TokenGuard } from "./utf8-guard.js";

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

export type Phase =
  | { kind: "reasoning" }
  | { kind: "answer" }
  | { kind: "tool_name" }
  | { kind: "tool_args"; tool: ToolDefinition; id: string }
  | { kind: "after_tool" };

/** Most recent output tokens the repetition penalties look back over. */
const PUNISH_WINDOW = 256;

const noMetadata: TokenMetadata = {};

export class PhaseSampling {
  /** Output tokens so far, for the penalties. */
  private readonly punish: Token[] = [];
  private readonly banned: Set<Token>;
  private readonly bannedOutsideCalls: Set<Token>;
  private readonly biasAll: TokenBias | undefined;
  private readonly biasText: TokenBias | undefined;
  // Grammar phases sample only well-formed UTF-8 (see utf8-guard.ts): the bans follow the bytes so far.
  private guard: Utf8TokenGuard | null = null;
  private utf8State: Utf8State = Utf8State.Boundary;
  private readonly guardedBiases = new Map<string, TokenBias>();
  private readonly penalties: SequenceEvaluateOptions["repeatPenalty"];
  private readonly scoring: TokenMetadata;
  /** Alternatives reported per scored token (0 to 20). */
  readonly topN: number;

  constructor(
    private readonly model: LlamaModel,
    syntax: PromptSyntax,
    private readonly request: EngineRequest,
    private readonly grammars: CompiledGrammars,
    toolsCallable: boolean,
  ) {
    this.banned = new Set<Token>(syntax.thought?.banTokens ?? []);
    this.bannedOutsideCalls = new Set<Token>(this.banned);
    if (!toolsCallable) for (const t of syntax.toolCall?.triggerTokens ?? []) this.bannedOutsideCalls.add(t);
    this.biasAll = this.biasFor(this.banned);
    this.biasText = this.biasFor(this.bannedOutsideCalls);
    const sampling = request.sampling;
    this.penalties =
      (sampling.frequencyPenalty ?? 0) !== 0 || (sampling.presencePenalty ?? 0) !== 0
        ? {
            punishTokens: () => this.punish.slice(-PUNISH_WINDOW),
            maxPunishTokens: PUNISH_WINDOW,
            penalty: 1,
            frequencyPenalty: sampling.frequencyPenalty ?? 0,
            presencePenalty: sampling.presencePenalty ?? 0,
          }
        : undefined;
    const probe = request.tokenProbabilities;
    this.topN = probe ? Math.max(0, Math.min(20, probe.top)) : 0;
    this.scoring = probe ? metadataFor(this.topN, sampling.temperature) : noMetadata;
  }

  constraintsFor(phase: Phase): PhaseConstraints {
    let grammar: LlamaGrammar | null = null;
    if (phase.kind === "answer") grammar = this.grammars.answer;
    else if (phase.kind === "tool_name") grammar = this.grammars.toolNames;
    else if (phase.kind === "tool_args") grammar = this.grammars.toolArguments.get(phase.tool.name) ?? null;
    return { grammar, banned: isText(phase) ? this.bannedOutsideCalls : this.banned };
  }

  /** The evaluation options of a phase that starts now (its UTF-8 guard starts at a character boundary). */
  optionsFor(phase: Phase, { grammar }: PhaseConstraints): SequenceEvaluateOptions {
    const text = isText(phase);
    this.guard = grammar ? Utf8TokenGuard.for(this.model) : null;
    this.utf8State = Utf8State.Boundary;
    const sampling = this.request.sampling;
    return {
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: sampling.topK,
      seed: sampling.seed,
      repeatPenalty: this.penalties,
      tokenBias: this.guard ? this.guardedBias(text ? this.bannedOutsideCalls : this.banned, text ? "text" : "all") : text ? this.biasText : this.biasAll,
      grammarEvaluationState: grammar ? new LlamaGrammarEvaluationState({ model: this.model, grammar }) : undefined,
      yieldEogToken: true,
    };
  }

  /** Probabilities are asked for in the answer and tool-call phases only: reasoning is not scored. */
  metadataFor(phase: Phase): TokenMetadata {
    return this.scoring !== noMetadata && phase.kind !== "reasoning" && phase.kind !== "after_tool" ? this.scoring : noMetadata;
  }

  /** Whether tokens sampled with these metadata are scored. */
  scored(metadata: TokenMetadata): boolean {
    return metadata !== noMetadata;
  }

  /** A token the phase sampled (not the end of the turn): penalised from now on, and the UTF-8 guard moves past it. */
  sampled(token: Token): void {
    this.punish.push(token);
    if (this.guard) this.utf8State = this.guard.next(this.utf8State, token);
  }

  private biasFor(tokens: Set<Token>): TokenBias | undefined {
    if (tokens.size === 0) return undefined;
    const bias = new TokenBias(this.model.tokenizer);
    for (const t of tokens) bias.set(t, "never");
    return bias;
  }

  /**
   * The bias of a grammar phase, read per token: the phase's bans and what the bytes so far rule out; `after`
   * reads it for tokens a guess proposes that the generation has not taken yet (speculation.ts).
   */
  private guardedBias(base: Set<Token>, key: string): LookaheadBias {
    const at = (state: Utf8State): TokenBias => {
      const id = `${key}:${state}`;
      let bias = this.guardedBiases.get(id);
      if (bias === undefined) {
        bias = new TokenBias(this.model.tokenizer);
        for (const t of base) bias.set(t, "never");
        for (const t of this.guard!.banned(state)) bias.set(t, "never");
        this.guardedBiases.set(id, bias);
      }
      return bias;
    };
    return Object.assign(() => at(this.utf8State), {
      after: (pending: readonly Token[]) => at(pending.reduce((state, token) => this.guard!.next(state, token), this.utf8State)),
    });
  }
}

function isText(phase: Phase): boolean {
  return phase.kind === "answer" || phase.kind === "reasoning";
}
