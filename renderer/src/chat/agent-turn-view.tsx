// An agent run in the conversation: each model step and tool call as it happens (the passages a search found,
// what a tool gave back), and how the run ended. Kept with the chat once it ended.
import type { RunStep } from "../../../server/features/console/wire";
import type { AgentRunRecord, ChatProblem } from "./types";

const STATUS_WORDS: Record<string, string> = {
  queued: "Waiting for the model…",
  in_progress: "Working…",
  completed: "Done",
  cancelled: "Cancelled",
  incomplete: "Stopped by a limit",
  failed: "Failed",
  requires_action: "Waiting for a client tool",
};

interface SearchResult {
  results: Array<{ filename: string; line: number; text: string }>;
}

function toolSummary(step: Extract<RunStep, { type: "tool_call" }>): string {
  if (step.error) return `Error: ${step.error.message}`;
  const result = step.result as Record<string, unknown> | null;
  if (step.name === "file_search" && result) {
    const n = (result as unknown as SearchResult).results.length;
    return `${n} passage${n === 1 ? "" : "s"} found`;
  }
  if (step.name === "list_files" && result) {
    const n = (result.files as unknown[]).length;
    return `${n} file${n === 1 ? "" : "s"}`;
  }
  if (step.name === "read_file" && result) return `${String(result.text).length} characters of ${String(result.filename)}`;
  if (step.name === "calculator" && result) return `= ${String(result.result)}`;
  if (step.name === "current_time" && result) return String(result.local);
  return step.status === "in_progress" ? "Running…" : "";
}

function Step({ step }: { step: RunStep }) {
  if (step.type === "model_call")
    return (
      <div className="agent-step" data-testid="agent-step" data-type="model_call" data-status={step.status}>
        <div className="turn-note">
          Model · {step.status === "in_progress" ? "thinking…" : step.status}
          {step.status !== "in_progress" ? ` · ${step.usage.input_tokens} in, ${step.usage.output_tokens} out` : ""}
        </div>
        {step.text ? <p>{step.text}</p> : null}
        {step.tool_calls.map((c) => (
          <p key={c.call_id} className="turn-note">
            Calls <code>{c.name}</code> with <code>{c.arguments}</code>
          </p>
        ))}
      </div>
    );
  const hits = step.name === "file_search" ? ((step.result as SearchResult | null)?.results ?? []) : [];
  return (
    <div className="agent-step tool" data-testid="agent-step" data-type="tool_call" data-status={step.status} data-tool={step.name}>
      <div className="turn-note">
        Tool <code>{step.name}</code> · {step.status}
      </div>
      <p data-testid="agent-tool-summary">{toolSummary(step)}</p>
      {hits.length > 0 && (
        <ul className="agent-passages">
          {hits.map((hit, i) => (
            <li key={i} data-testid="agent-passage">
              <span className="turn-note">
                {hit.filename}, line {hit.line}
              </span>
              <blockquote>{hit.text}</blockquote>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function AgentTurnView({ run, problem, running }: { run: AgentRunRecord; problem?: ChatProblem; running: boolean }) {
  return (
    <article className="turn agent" data-testid="turn-agent" data-status={run.status} aria-busy={running} aria-label="The agent's run">
      <div className="agent-steps" data-testid="agent-steps">
        {run.steps.map((step) => (
          <Step key={step.id} step={step} />
        ))}
      </div>
      <p className="agent-status" data-testid="agent-status" data-status={run.status} role="status">
        {STATUS_WORDS[run.status] ?? run.status}
        {run.incomplete ? ` (${run.incomplete.replace(/_/g, " ")})` : ""}
        {run.error ? `: ${run.error}` : ""}
        {!running && run.steps.length > 0 && run.usage ? ` · ${run.steps.length} steps · ${run.usage.total_tokens} tokens` : ""}
      </p>
      {problem && (
        <div className="problem" role="alert" data-testid="agent-problem">
          <p className="problem-title">{problem.title}</p>
          <p>{problem.detail}</p>
          {problem.reference && <p className="server-said">{problem.reference}</p>}
        </div>
      )}
    </article>
  );
}
