// An agent run (POST /v1/agent/run, streamed) as part of the chat: its steps and tool calls live while it
// runs, then the run is kept in the conversation (and saved with the chat). Cancel is POST
// /v1/agent/run/{id}/cancel. Like every client, the window talks to the API over HTTP with its own key.
import { useCallback, useMemo, useRef } from "react";
import type { RunEvent, RunObject, RunStep } from "../../../server/features/console/wire";
import { apiErrorOf, apiJson, LOCAL_TIMEZONE, withWindowKey } from "../api/http";
import { createStore, useStore } from "../state/store";
import type { AgentRunRecord } from "./types";

export type FirstStep = "auto" | "file_search" | "list_files";

export interface AgentRunInput {
  task: string;
  fileIds: string[];
  effort: string;
  firstStep: FirstStep;
  maxSteps: number;
}

function parseFrames(buffer: string): { events: RunEvent[]; rest: string } {
  const events: RunEvent[] = [];
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
    if (data) events.push(JSON.parse(data) as RunEvent);
  }
  return { events, rest };
}

function fromRun(run: RunObject, record: AgentRunRecord): AgentRunRecord {
  return {
    ...record,
    runId: run.id,
    status: run.status,
    usage: run.usage,
    incomplete: run.incomplete_details?.reason ?? null,
    error: run.error?.message ?? null,
    // The run's own steps are complete once it ended; while it runs, the streamed ones are newer.
    steps: run.steps.length >= record.steps.length ? run.steps : record.steps,
  };
}

function withStep(steps: RunStep[], step: RunStep): RunStep[] {
  return steps.some((s) => s.id === step.id) ? steps.map((s) => (s.id === step.id ? step : s)) : [...steps, step];
}

export function useAgentRun(baseUrl: string | null) {
  const live = useMemo(() => createStore<{ run: AgentRunRecord | null }>({ run: null }), []);
  const running = useStore(live, (s) => s.run !== null);
  const abort = useRef<AbortController | null>(null);

  /** Runs the task; `commit` gets the run as it ended (and the error, when it could not start or broke off). */
  const start = useCallback(
    async (input: AgentRunInput, commit: (run: AgentRunRecord, error: unknown) => void) => {
      if (!baseUrl) return;
      const controller = new AbortController();
      abort.current = controller;
      let record: AgentRunRecord = { runId: null, status: "queued", steps: [], usage: null, incomplete: null, error: null, fileIds: input.fileIds };
      live.set({ run: record });
      let problem: unknown = null;
      try {
        await withWindowKey(async (key) => {
          const res = await fetch(`${baseUrl}/agent/run`, {
            method: "POST",
            signal: controller.signal,
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-timezone": LOCAL_TIMEZONE },
            body: JSON.stringify({
              input: input.task,
              stream: true,
              reasoning: { effort: input.effort },
              max_steps: input.maxSteps,
              ...(input.fileIds.length > 0 ? { file_ids: input.fileIds } : {}),
              ...(input.firstStep !== "auto" ? { tool_choice: { type: input.firstStep } } : {}),
            }),
          });
          if (!res.ok || !res.body) throw apiErrorOf(res.status, await res.text(), res.headers.get("x-request-id"));
          const reader = res.body.getReader();
          const decoder = new TextDecoder();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            const parsed = parseFrames(buffer + decoder.decode(value, { stream: true }));
            buffer = parsed.rest;
            for (const event of parsed.events) {
              if ("run" in event) record = fromRun(event.run, record);
              else if (event.type === "run.step.created" || event.type === "run.step.completed") record = { ...record, steps: withStep(record.steps, event.step) };
              else if (event.type === "run.output_text.delta")
                record = { ...record, steps: record.steps.map((s) => (s.id === event.step_id && s.type === "model_call" ? { ...s, text: s.text + event.delta } : s)) };
              live.set({ run: record });
            }
          }
        });
      } catch (err) {
        if (!controller.signal.aborted) problem = err;
      }
      abort.current = null;
      if (record.status === "queued" || record.status === "in_progress") record = { ...record, status: problem ? "failed" : "cancelled" };
      commit(record, problem);
      live.set({ run: null });
    },
    [baseUrl, live],
  );

  const cancel = useCallback(async () => {
    const id = live.get().run?.runId;
    if (!id || !baseUrl) return abort.current?.abort();
    try {
      const run = await apiJson<RunObject>(`${baseUrl}/agent/run/${encodeURIComponent(id)}/cancel`, { method: "POST" });
      const current = live.get().run;
      if (current) live.set({ run: fromRun(run, current) });
    } catch {
      abort.current?.abort();
    }
  }, [baseUrl, live]);

  return { live, running, start, cancel };
}

export type AgentRun = ReturnType<typeof useAgentRun>;
