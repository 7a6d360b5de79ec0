// Why one file (over 400 lines): one agent run's life, the loop, its model steps, its tool steps and how it
// ends, is one state machine over one object's state (steps, usage, the conversation, the stop cause); the
// first ~140 lines are the run's types (RunObject, steps, events), which the routes and the stream read.
// One agent run: a loop of model steps on the shared pipeline (work class "agent") and the tool calls they
// make. Built-in tools run here; a call of a client function ends the run with requires_action (the client
// continues statelessly by sending the run's items back with the outputs). The run's content lives only in
// this object while it runs and in the response; nothing of it is stored.
//
// Ends: completed (an answer), requires_action, incomplete (max_steps, timeout, max_output_tokens),
// cancelled (cancel endpoint, or the client left), failed (an error; the reason in `error`).
import { toAppError } from "../../core/errors.js";
import { newId, nowSeconds } from "../../core/ids.js";
import type { CanonicalMessage, InferenceResult, ToolCall, ToolChoice, Usage } from "../../core/inference.js";
import type { InferencePipeline } from "../../pipeline/pipeline.js";
import { builtinDefinitions, type AgentRunRequest, type ToolEcho } from "./run-request.js";
import { isBuiltinTool, type ToolBox } from "./tools.js";

export type RunStatus = "queued" | "in_progress" | "requires_action" | "completed" | "failed" | "cancelled" | "incomplete";
export const FINAL_STATUSES: readonly RunStatus[] = ["requires_action", "completed", "failed", "cancelled", "incomplete"];

/** Why a run was stopped from outside its loop. */
export type StopCause = "cancelled" | "timeout" | "disconnected" | "shutdown";

export interface RunUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ModelStep {
  id: string;
  object: "agent.run.step";
  type: "model_call";
  index: number;
  status: "in_progress" | "completed" | "cancelled" | "incomplete" | "failed";
  created_at: number;
  completed_at: number | null;
  duration_ms: number | null;
  text: string;
  /** Present when the key has the reasoning trace enabled (as on the Responses surface). */
  reasoning?: string;
  tool_calls: Array<{ call_id: string; name: string; arguments: string }>;
  stop_reason: string | null;
  usage: RunUsage;
}

export interface ToolStep {
  id: string;
  object: "agent.run.step";
  type: "tool_call";
  index: number;
  status: "in_progress" | "completed" | "failed" | "requires_action";
  created_at: number;
  completed_at: number | null;
  duration_ms: number | null;
  tool_type: "built_in" | "function";
  call_id: string;
  name: string;
  arguments: string;
  /** What the model read back (JSON text); null for a client function until the client sends it. */
  output: string | null;
  result: unknown;
  error: { code: string; message: string } | null;
}

export type RunStep = ModelStep | ToolStep;

export type OutputItem =
  | { type: "message"; id: string; role: "assistant"; status: "completed" | "incomplete"; content: Array<{ type: "output_text"; text: string; annotations: [] }> }
  | { type: "function_call"; id: string; call_id: string; name: string; arguments: string; status: "completed" }
  | { type: "function_call_output"; id: string; call_id: string; output: string };

export interface RunObject {
  id: string;
  run_id: string;
  object: "agent.run";
  created_at: number;
  completed_at: number | null;
  status: RunStatus;
  model: string;
  instructions: string | null;
  tools: ToolEcho[];
  tool_choice: unknown;
  reset_tool_choice: boolean;
  file_ids: string[] | null;
  max_steps: number;
  timeout_seconds: number;
  steps: RunStep[];
  output: OutputItem[];
  output_text: string;
  required_action: { type: "submit_tool_outputs"; submit_tool_outputs: { tool_calls: Array<{ type: "function_call"; call_id: string; name: string; arguments: string }> } } | null;
  incomplete_details: { reason: "max_steps" | "timeout" | "max_output_tokens" } | null;
  error: { code: string; message: string } | null;
  usage: RunUsage;
  metadata: Record<string, string>;
}

/** Stream events (the route adds sequence_number). */
export type RunEvent =
  | { type: "run.created" | "run.in_progress" | "run.completed" | "run.requires_action" | "run.incomplete" | "run.cancelled" | "run.failed"; run: RunObject }
  | { type: "run.step.created" | "run.step.completed"; step: RunStep }
  | { type: "run.output_text.delta" | "run.reasoning.delta"; step_id: string; delta: string }
  | { type: "run.function_call_arguments.delta"; step_id: string; call_id: string; name: string; delta: string };

export interface AgentRunOptions {
  request: AgentRunRequest;
  accountId: string;
  pipeline: InferencePipeline;
  tools: ToolBox;
  timezone: string;
  /** The key shows reasoning (the Responses surface's reasoning trace setting). */
  reasoningTrace: boolean;
  emit: (event: RunEvent) => void | Promise<void>;
}

export function emptyUsage(): RunUsage {
  return { input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 };
}

function usageOf(usage: Usage): RunUsage {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export function addUsage(a: RunUsage, b: RunUsage): RunUsage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    input_tokens_details: { cached_tokens: a.input_tokens_details.cached_tokens + b.input_tokens_details.cached_tokens },
    output_tokens: a.output_tokens + b.output_tokens,
    output_tokens_details: { reasoning_tokens: a.output_tokens_details.reasoning_tokens + b.output_tokens_details.reasoning_tokens },
    total_tokens: a.total_tokens + b.total_tokens,
  };
}

const AGENT_PROMPT =
  "You are an agent working for the user. Use the tools to look things up before you answer, one step at a time; " +
  "when you have what you need, answer in plain text.";

export class AgentRun {
  readonly id = newId("run_");
  readonly createdAt = nowSeconds();
  readonly deadline: number;
  status: RunStatus = "queued";
  private completedAt: number | null = null;
  private readonly steps: RunStep[] = [];
  private readonly output: OutputItem[] = [];
  private requiredAction: RunObject["required_action"] = null;
  private incomplete: RunObject["incomplete_details"] = null;
  private error: RunObject["error"] = null;
  private cause: StopCause | null = null;
  private readonly controller = new AbortController();
  private started = false;
  private finished: Promise<void> | null = null;

  constructor(private readonly options: AgentRunOptions) {
    this.deadline = Date.now() + options.request.timeoutSeconds * 1000;
  }

  get accountId(): string {
    return this.options.accountId;
  }

  get ended(): boolean {
    return FINAL_STATUSES.includes(this.status);
  }

  /** Model steps and tool calls so far. */
  get stepCount(): number {
    return this.steps.length;
  }

  get usage(): RunUsage {
    return this.steps.reduce((sum, s) => (s.type === "model_call" ? addUsage(sum, s.usage) : sum), emptyUsage());
  }

  /** Runs the loop to its end (once); resolves when the run has ended, however it ended. */
  run(): Promise<void> {
    this.finished ??= this.loop();
    return this.finished;
  }

  /** Stops the run: the generation in flight stops within a token. The first cause wins. */
  stop(cause: StopCause): void {
    if (this.ended || this.cause) return;
    this.cause = cause;
    this.controller.abort(new Error(`agent run stopped: ${cause}`));
  }

  toObject(): RunObject {
    const { request } = this.options;
    return {
      id: this.id,
      run_id: this.id,
      object: "agent.run",
      created_at: this.createdAt,
      completed_at: this.completedAt,
      status: this.status,
      model: request.model,
      instructions: request.instructions,
      tools: request.toolsEcho,
      tool_choice: request.toolChoiceEcho,
      reset_tool_choice: request.resetToolChoice,
      file_ids: request.fileIds,
      max_steps: request.maxSteps,
      timeout_seconds: request.timeoutSeconds,
      steps: structuredClone(this.steps),
      output: structuredClone(this.output),
      output_text: this.output
        .flatMap((item) => (item.type === "message" ? item.content.map((c) => c.text) : []))
        .join(""),
      required_action: structuredClone(this.requiredAction),
      incomplete_details: this.incomplete,
      error: this.error,
      usage: this.usage,
      metadata: request.metadata,
    };
  }

  private async emit(event: RunEvent): Promise<void> {
    await this.options.emit(event);
  }

  private async loop(): Promise<void> {
    const { request } = this.options;
    const timer = setTimeout(() => this.stop("timeout"), Math.max(0, this.deadline - Date.now()));
    try {
      await this.emit({ type: "run.created", run: this.toObject() });
      const conversation: CanonicalMessage[] = [this.systemMessage(), ...request.messages];
      let modelSteps = 0;
      for (;;) {
        if (this.cause) break;
        if (modelSteps >= request.maxSteps) {
          this.incomplete = { reason: "max_steps" };
          this.status = "incomplete";
          break;
        }
        const toolChoice = modelSteps === 0 || !request.resetToolChoice ? request.toolChoice : ({ type: "auto" } as ToolChoice);
        modelSteps++;
        const result = await this.modelStep(conversation, toolChoice);
        if (!result) break;
        conversation.push({
          role: "assistant",
          content: result.text ? [{ type: "text", text: result.text }] : [],
          ...(result.reasoning ? { reasoning: result.reasoning } : {}),
          ...(result.toolCalls.length ? { toolCalls: result.toolCalls } : {}),
        });
        if (result.toolCalls.length === 0 || result.stopReason === "max_tokens") {
          const cut = result.stopReason === "max_tokens";
          if (result.text || !cut) this.output.push(messageItem(result.text, cut ? "incomplete" : "completed"));
          if (cut) this.incomplete = { reason: "max_output_tokens" };
          this.status = cut ? "incomplete" : "completed";
          break;
        }
        if (result.text) this.output.push(messageItem(result.text, "completed"));
        for (const call of result.toolCalls)
          this.output.push({ type: "function_call", id: newId("fc_"), call_id: call.id, name: call.name, arguments: call.arguments, status: "completed" });
        const pending: ToolCall[] = [];
        for (const call of result.toolCalls) {
          if (this.cause) break;
          if (isBuiltinTool(call.name) && request.builtins.includes(call.name)) {
            const output = await this.toolStep(call);
            conversation.push({ role: "tool", toolCallId: call.id, content: [{ type: "text", text: output.text }], ...(output.isError ? { isError: true } : {}) });
            this.output.push({ type: "function_call_output", id: newId("fco_"), call_id: call.id, output: output.text });
          } else pending.push(call);
        }
        if (this.cause) break;
        if (pending.length > 0) {
          for (const call of pending) await this.clientCallStep(call);
          this.requiredAction = {
            type: "submit_tool_outputs",
            submit_tool_outputs: { tool_calls: pending.map((c) => ({ type: "function_call", call_id: c.id, name: c.name, arguments: c.arguments })) },
          };
          this.status = "requires_action";
          break;
        }
      }
    } catch (err) {
      if (!this.cause) {
        const error = toAppError(err);
        this.error = { code: error.code ?? error.kind, message: error.message };
        this.status = "failed";
      }
    } finally {
      clearTimeout(timer);
    }
    if (this.cause) this.settleStopped(this.cause);
    this.completedAt = nowSeconds();
    const terminal = `run.${this.status}` as Extract<RunEvent, { run: RunObject }>["type"];
    try {
      await this.emit({ type: terminal, run: this.toObject() });
    } catch {
      // The client left; the run has ended all the same.
    }
  }

  private settleStopped(cause: StopCause): void {
    for (const step of this.steps) if (step.status === "in_progress") step.status = step.type === "model_call" ? "cancelled" : "failed";
    this.requiredAction = null;
    if (cause === "timeout") {
      this.status = "incomplete";
      this.incomplete = { reason: "timeout" };
    } else if (cause === "shutdown") {
      this.status = "failed";
      this.error = { code: "shutting_down", message: "The server shut down while the run was in progress." };
    } else this.status = "cancelled";
  }

  private systemMessage(): CanonicalMessage {
    const { request, tools, timezone } = this.options;
    const lines = [AGENT_PROMPT];
    if (request.builtins.some((b) => b === "file_search" || b === "list_files" || b === "read_file")) {
      const files = tools.files();
      lines.push(
        files.length === 0
          ? "The user has no files for this run."
          : `The user's files for this run:\n${files.map((f) => `- ${f.filename} (${f.id}, ${f.mime_type}, ${f.size} bytes)`).join("\n")}`,
      );
    }
    lines.push(`The user's time zone is ${timezone}.`);
    if (request.instructions) lines.push(request.instructions);
    return { role: "system", content: [{ type: "text", text: lines.join("\n\n") }] };
  }

  private newStepBase(): { id: string; object: "agent.run.step"; index: number; created_at: number; completed_at: null; duration_ms: null } {
    return { id: newId("step_"), object: "agent.run.step", index: this.steps.length, created_at: nowSeconds(), completed_at: null, duration_ms: null };
  }

  /** One inference; null when the run was stopped meanwhile. */
  private async modelStep(conversation: CanonicalMessage[], toolChoice: ToolChoice): Promise<InferenceResult | null> {
    const { request, pipeline, accountId, reasoningTrace } = this.options;
    const step: ModelStep = {
      ...this.newStepBase(),
      type: "model_call",
      status: "in_progress",
      text: "",
      ...(reasoningTrace ? { reasoning: "" } : {}),
      tool_calls: [],
      stop_reason: null,
      usage: emptyUsage(),
    };
    let began = performance.now();
    // The step exists once its generation has begun (after any wait for a sequence): the run is then
    // in_progress, and the step's events follow.
    let announced = false;
    const announce = async () => {
      if (announced) return;
      announced = true;
      began = performance.now();
      step.created_at = nowSeconds();
      step.index = this.steps.length;
      this.steps.push(step);
      if (!this.started) {
        this.started = true;
        this.status = "in_progress";
        await this.emit({ type: "run.in_progress", run: this.toObject() });
      }
      await this.emit({ type: "run.step.created", step: structuredClone(step) });
    };
    const calls = new Map<number, { call_id: string; name: string }>();
    let result: InferenceResult | null = null;
    let pieces = 0;
    try {
      const stream = await pipeline.open(
        {
          ...request.base,
          messages: conversation,
          tools: [...builtinDefinitions(request.builtins), ...request.functions],
          toolChoice,
        },
        { signal: this.controller.signal, accountId, workClass: "agent" },
      );
      for await (const event of stream) {
        switch (event.type) {
          case "start":
            step.usage = usageOf({ promptTokens: event.promptTokens, cachedTokens: event.cachedTokens, cacheWriteTokens: 0, completionTokens: 0, reasoningTokens: 0 });
            await announce();
            break;
          case "text.delta":
            pieces++;
            step.text += event.text;
            await this.emit({ type: "run.output_text.delta", step_id: step.id, delta: event.text });
            break;
          case "reasoning.delta":
            pieces++;
            if (step.reasoning !== undefined) {
              step.reasoning += event.text;
              await this.emit({ type: "run.reasoning.delta", step_id: step.id, delta: event.text });
            }
            break;
          case "tool_call.start":
            calls.set(event.index, { call_id: event.id, name: event.name });
            break;
          case "tool_call.delta": {
            pieces++;
            const call = calls.get(event.index);
            if (call) await this.emit({ type: "run.function_call_arguments.delta", step_id: step.id, call_id: call.call_id, name: call.name, delta: event.argumentsDelta });
            break;
          }
          case "tool_call.end":
            break;
          case "done":
            result = event.result;
            break;
        }
      }
    } catch (err) {
      if (!this.cause) {
        // A step that could not start (a prompt too long for the context, the model gone) is kept, failed.
        if (!announced) {
          step.index = this.steps.length;
          this.steps.push(step);
        }
        step.status = "failed";
        this.finishStep(step, began);
        throw err;
      }
    }
    // Stopped while waiting for a sequence: nothing was generated, so there is no step.
    if (!announced) return null;
    if (!result || this.cause) {
      // Stopped: the step keeps what it generated; its output tokens are the pieces streamed until then.
      step.status = "cancelled";
      step.usage = addUsage(step.usage, { ...emptyUsage(), output_tokens: pieces, total_tokens: pieces });
      this.finishStep(step, began);
      await this.emit({ type: "run.step.completed", step: structuredClone(step) });
      return null;
    }
    step.text = result.text;
    if (step.reasoning !== undefined) step.reasoning = result.reasoning;
    step.tool_calls = result.toolCalls.map((c) => ({ call_id: c.id, name: c.name, arguments: c.arguments }));
    step.stop_reason = result.stopReason;
    step.usage = usageOf(result.usage);
    step.status = result.stopReason === "max_tokens" ? "incomplete" : "completed";
    this.finishStep(step, began);
    await this.emit({ type: "run.step.completed", step: structuredClone(step) });
    return result;
  }

  private finishStep(step: RunStep, began: number): void {
    step.completed_at = nowSeconds();
    step.duration_ms = Math.round(performance.now() - began);
  }

  /** A tool call's step, added to the run and announced. */
  private async openToolStep(call: ToolCall, kind: "built_in" | "function"): Promise<ToolStep> {
    const step: ToolStep = {
      ...this.newStepBase(),
      type: "tool_call",
      status: kind === "built_in" ? "in_progress" : "requires_action",
      tool_type: kind,
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
      output: null,
      result: null,
      error: null,
    };
    this.steps.push(step);
    await this.emit({ type: "run.step.created", step: structuredClone(step) });
    return step;
  }

  private async toolStep(call: ToolCall): Promise<{ text: string; isError: boolean }> {
    const began = performance.now();
    const step = await this.openToolStep(call, "built_in");
    const outcome = await this.options.tools.run(call.name as Parameters<ToolBox["run"]>[0], call.arguments);
    step.output = outcome.output;
    step.result = outcome.result;
    step.error = outcome.error;
    step.status = outcome.error ? "failed" : "completed";
    this.finishStep(step, began);
    await this.emit({ type: "run.step.completed", step: structuredClone(step) });
    return { text: outcome.output, isError: outcome.error !== null };
  }

  private async clientCallStep(call: ToolCall): Promise<void> {
    await this.openToolStep(call, "function");
  }
}

function messageItem(text: string, status: "completed" | "incomplete"): OutputItem {
  return { type: "message", id: newId("msg_"), role: "assistant", status, content: [{ type: "output_text", text, annotations: [] }] };
}
