// The chat's Agent mode: the server's agent run (POST /v1/agent/run, streamed) over the files the user
// picks, with each step and tool call shown as it happens, and Cancel (POST /v1/agent/run/{id}/cancel).
// Like every client, the window talks to the API over HTTP with its own key; nothing of a run is saved.
import { useEffect, useRef, useState } from "react";
import { consoleApi } from "../console-client";
import { listFiles, type FileOut } from "../files-client";
import { Send, Square } from "../icons";

interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

interface Step {
  id: string;
  type: "model_call" | "tool_call";
  status: string;
  text?: string;
  tool_calls?: Array<{ call_id: string; name: string; arguments: string }>;
  name?: string;
  arguments?: string;
  tool_type?: string;
  output?: string | null;
  result?: any;
  error?: { message: string } | null;
  usage?: Usage;
  duration_ms?: number | null;
}

interface Run {
  id: string;
  status: string;
  steps: Step[];
  output_text: string;
  usage: Usage;
  error: { message: string } | null;
  incomplete_details: { reason: string } | null;
}

type FirstStep = "auto" | "file_search" | "list_files";

const STATUS_WORDS: Record<string, string> = {
  queued: "Waiting for the model…",
  in_progress: "Working…",
  completed: "Done",
  cancelled: "Cancelled",
  incomplete: "Stopped by a limit",
  failed: "Failed",
  requires_action: "Waiting for a client tool",
};

function parseFrames(buffer: string): { events: Array<{ type: string; [k: string]: any }>; rest: string } {
  const events: Array<{ type: string; [k: string]: any }> = [];
  let rest = buffer;
  let cut: number;
  while ((cut = rest.indexOf("\n\n")) !== -1) {
    const block = rest.slice(0, cut);
    rest = rest.slice(cut + 2);
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trimStart())
      .join("\n");
    if (data) events.push(JSON.parse(data));
  }
  return { events, rest };
}

function toolSummary(step: Step): string {
  if (step.error) return `Error: ${step.error.message}`;
  const result = step.result;
  if (step.name === "file_search" && result) return `${result.results.length} passage${result.results.length === 1 ? "" : "s"} found`;
  if (step.name === "list_files" && result) return `${result.files.length} file${result.files.length === 1 ? "" : "s"}`;
  if (step.name === "read_file" && result) return `${result.text.length} characters of ${result.filename}`;
  if (step.name === "calculator" && result) return `= ${result.result}`;
  if (step.name === "current_time" && result) return result.local;
  return step.status === "in_progress" ? "Running…" : "";
}

/** `effort`: the chat's Thinking setting, used for every step of the run. */
export function AgentPanel({ baseUrl, effort }: { baseUrl: string; effort: string }) {
  const [files, setFiles] = useState<FileOut[] | null>(null);
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [task, setTask] = useState("");
  const [firstStep, setFirstStep] = useState<FirstStep>("auto");
  const [maxSteps, setMaxSteps] = useState(8);
  const [run, setRun] = useState<Run | null>(null);
  const [steps, setSteps] = useState<Step[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const [running, setRunning] = useState(false);
  const runId = useRef<string | null>(null);
  const abort = useRef<AbortController | null>(null);

  useEffect(() => {
    let live = true;
    void (async () => {
      try {
        const list = await listFiles(baseUrl, await consoleApi.windowKey());
        if (live) setFiles(list.filter((f) => f.status !== "error"));
      } catch (err) {
        if (live) setProblem(`The files could not be listed: ${(err as Error).message}`);
      }
    })();
    return () => {
      live = false;
      abort.current?.abort();
    };
  }, [baseUrl]);

  const changeStep = (step: Step) => setSteps((all) => (all.some((s) => s.id === step.id) ? all.map((s) => (s.id === step.id ? step : s)) : [...all, step]));

  async function start() {
    if (!task.trim() || running) return;
    setProblem(null);
    setSteps([]);
    setRun(null);
    setRunning(true);
    runId.current = null;
    const controller = new AbortController();
    abort.current = controller;
    try {
      const key = await consoleApi.windowKey();
      const res = await fetch(`${baseUrl}/agent/run`, {
        method: "POST",
        signal: controller.signal,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-timezone": Intl.DateTimeFormat().resolvedOptions().timeZone },
        body: JSON.stringify({
          input: task.trim(),
          stream: true,
          reasoning: { effort },
          max_steps: maxSteps,
          ...(picked.size > 0 ? { file_ids: [...picked] } : {}),
          ...(firstStep !== "auto" ? { tool_choice: { type: firstStep } } : {}),
        }),
      });
      if (!res.ok || !res.body) {
        const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
        throw new Error(body?.error?.message ?? `The server answered ${res.status}.`);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const parsed = parseFrames(buffer + decoder.decode(value, { stream: true }));
        buffer = parsed.rest;
        for (const event of parsed.events) {
          if (event.run) {
            runId.current = event.run.id;
            setRun(event.run);
          }
          if (event.type === "run.step.created" || event.type === "run.step.completed") changeStep(event.step);
          else if (event.type === "run.output_text.delta")
            setSteps((all) => all.map((s) => (s.id === event.step_id ? { ...s, text: (s.text ?? "") + event.delta } : s)));
        }
      }
    } catch (err) {
      if (!controller.signal.aborted) setProblem((err as Error).message);
    } finally {
      setRunning(false);
      abort.current = null;
    }
  }

  async function cancel() {
    const id = runId.current;
    if (!id) return abort.current?.abort();
    try {
      const key = await consoleApi.windowKey();
      const res = await fetch(`${baseUrl}/agent/run/${encodeURIComponent(id)}/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
      if (res.ok) setRun((await res.json()) as Run);
    } catch (err) {
      setProblem(`Cancel failed: ${(err as Error).message}`);
    }
  }

  const status = run?.status ?? (running ? "queued" : null);
  return (
    <div className="agent-panel" data-testid="agent-panel">
      <fieldset className="agent-files" data-testid="agent-files">
        <legend>Files the agent may use</legend>
        {files === null ? (
          <p className="hint">Loading your files…</p>
        ) : files.length === 0 ? (
          <p className="hint">No files yet: upload some on the Files page, or attach them in a chat.</p>
        ) : (
          <>
            <p className="hint">{picked.size === 0 ? "None picked: the agent may use all of them." : `${picked.size} picked.`}</p>
            <ul>
              {files.map((f) => (
                <li key={f.id}>
                  <label>
                    <input
                      type="checkbox"
                      data-testid="agent-file"
                      data-file-id={f.id}
                      checked={picked.has(f.id)}
                      disabled={running}
                      onChange={(e) =>
                        setPicked((all) => {
                          const next = new Set(all);
                          if (e.target.checked) next.add(f.id);
                          else next.delete(f.id);
                          return next;
                        })
                      }
                    />{" "}
                    {f.filename}
                  </label>
                </li>
              ))}
            </ul>
          </>
        )}
      </fieldset>

      <div className="turns agent-steps" data-testid="agent-steps" aria-label="Agent steps" aria-live="polite" tabIndex={0}>
        {steps.length === 0 && !running && <p className="empty">Give the agent a task: it searches and reads your files, calculates, and answers.</p>}
        {steps.map((step) =>
          step.type === "model_call" ? (
            <div key={step.id} className="turn agent-step" data-testid="agent-step" data-type="model_call" data-status={step.status}>
              <div className="turn-note">
                Model · {step.status === "in_progress" ? "thinking…" : step.status}
                {step.usage && step.status !== "in_progress" ? ` · ${step.usage.input_tokens} in, ${step.usage.output_tokens} out` : ""}
              </div>
              {step.text ? <p>{step.text}</p> : null}
              {(step.tool_calls ?? []).map((c) => (
                <p key={c.call_id} className="turn-note">
                  Calls <code>{c.name}</code> with <code>{c.arguments}</code>
                </p>
              ))}
            </div>
          ) : (
            <div key={step.id} className="turn agent-step tool" data-testid="agent-step" data-type="tool_call" data-status={step.status} data-tool={step.name}>
              <div className="turn-note">
                Tool <code>{step.name}</code> · {step.status}
              </div>
              <p data-testid="agent-tool-summary">{toolSummary(step)}</p>
              {step.name === "file_search" && step.result?.results?.length ? (
                <ul className="agent-passages">
                  {step.result.results.map((hit: any, i: number) => (
                    <li key={i} data-testid="agent-passage">
                      <span className="turn-note">
                        {hit.filename}, line {hit.line}
                      </span>
                      <blockquote>{hit.text}</blockquote>
                    </li>
                  ))}
                </ul>
              ) : null}
            </div>
          ),
        )}
      </div>

      {status && (
        <p className="agent-status" data-testid="agent-status" data-status={status} role="status">
          {STATUS_WORDS[status] ?? status}
          {run?.incomplete_details ? ` (${run.incomplete_details.reason.replace(/_/g, " ")})` : ""}
          {run?.error ? `: ${run.error.message}` : ""}
          {run && run.steps.length > 0 && !running ? ` · ${run.steps.length} steps · ${run.usage.total_tokens} tokens` : ""}
        </p>
      )}
      {problem && (
        <p className="notice" role="alert" data-testid="agent-problem">
          {problem}
        </p>
      )}

      <form
        className="composer"
        onSubmit={(e) => {
          e.preventDefault();
          void start();
        }}
      >
        <label htmlFor="agent-input" className="sr-only">
          Task
        </label>
        <textarea id="agent-input" data-testid="agent-input" rows={3} value={task} placeholder="A task for the agent, e.g. When do the backups run?" onChange={(e) => setTask(e.target.value)} />
        <div className="composer-actions">
          <label className="small">
            First step{" "}
            <select data-testid="agent-first-step" value={firstStep} disabled={running} onChange={(e) => setFirstStep(e.target.value as FirstStep)}>
              <option value="auto">Model decides</option>
              <option value="file_search">Search the files</option>
              <option value="list_files">List the files</option>
            </select>
          </label>
          <label className="small">
            Max steps{" "}
            <input type="number" min={1} max={64} data-testid="agent-max-steps" value={maxSteps} disabled={running} onChange={(e) => setMaxSteps(Math.min(64, Math.max(1, Number(e.target.value) || 1)))} />
          </label>
          {running ? (
            <button type="button" className="danger" data-testid="agent-cancel" onClick={() => void cancel()}>
              <Square size={14} aria-hidden /> Cancel
            </button>
          ) : (
            <button type="submit" className="primary" data-testid="agent-run" disabled={!task.trim()}>
              <Send size={14} aria-hidden /> Run
            </button>
          )}
        </div>
      </form>
    </div>
  );
}
