// Agent runs on `svc serve` with the generated model: POST /v1/agent/run (non-streaming and streamed) and
// its cancel, driven over real HTTP as a client would. The tiny model is random, so where a test needs a
// tool call it forces one (tool_choice), and the file it searches is written so that the model's
// nonsense queries (brackets and quotes, which its grammar-constrained strings are made of) are found in it.
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { sseEvents, type SseEvent } from "../support/sse-events.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let dataDir: string;
let key: string;
let otherKey: string;
let fileId: string;

const NOTES = [
  "# Service notes",
  "The heron gateway listens on port 8080 and answers within 40 ms.",
  "",
  'Its settings: {"ports": [80, 443], "limits": {"burst": {"max": 5}}, "tags": ["edge", ["eu", "us"]]}',
  "",
  "Backups run nightly at 02:00 and are kept for 14 days.",
].join("\n");

type Run = Record<string, any> & { id: string; status: string; steps: any[]; output: any[]; usage: Usage };
interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

const FAST = { reasoning: { effort: "none" } };
/** A run that keeps calling a tool until a limit stops it. */
const ENDLESS = { ...FAST, tools: [{ type: "calculator" }], tool_choice: "required", reset_tool_choice: false, max_steps: 64, temperature: 0 };

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  otherKey = createKey(dataDir, "--account", "someone-else");
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "32768", "--agent-runs-limit", "3"] });
  const client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  fileId = (await client.files.create({ file: await toFile(Buffer.from(NOTES), "notes.md"), purpose: "user_data" })).id;
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

function post(path: string, body: unknown, apiKey = key, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

async function runOf(body: unknown, headers: Record<string, string> = {}): Promise<{ res: Response; run: Run }> {
  const res = await post("/v1/agent/run", body, key, headers);
  expect(res.status).toBe(200);
  return { res, run: (await res.json()) as Run };
}

function sumOfSteps(run: Run): Usage {
  const sum: Usage = { input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 };
  for (const step of run.steps.filter((s) => s.type === "model_call")) {
    sum.input_tokens += step.usage.input_tokens;
    sum.input_tokens_details.cached_tokens += step.usage.input_tokens_details.cached_tokens;
    sum.output_tokens += step.usage.output_tokens;
    sum.output_tokens_details.reasoning_tokens += step.usage.output_tokens_details.reasoning_tokens;
    sum.total_tokens += step.usage.total_tokens;
  }
  return sum;
}

/** Reads a streamed run's events as they arrive; `until` stops reading early (the stream goes on). */
async function readEvents(res: Response, until?: (e: SseEvent) => boolean): Promise<{ events: SseEvent[]; rest: () => Promise<SseEvent[]> }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const events: SseEvent[] = [];
  const pump = async (stop?: (e: SseEvent) => boolean): Promise<boolean> => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return true;
      text += decoder.decode(value, { stream: true });
      const cut = text.lastIndexOf("\n\n");
      if (cut < 0) continue;
      const fresh = sseEvents(text.slice(0, cut + 2));
      text = text.slice(cut + 2);
      events.push(...fresh);
      if (stop && fresh.some(stop)) return false;
    }
  };
  await pump(until);
  return {
    events,
    rest: async () => {
      await pump();
      return events;
    },
  };
}

describe("a run with the built-in file search", () => {
  it("calls file_search on the uploaded file, finds the passage, answers; usage is the sum of its steps", async () => {
    const { res, run } = await runOf({ ...FAST, input: "What are the gateway's settings?", file_ids: [fileId], tools: [{ type: "file_search" }], tool_choice: { type: "file_search" }, temperature: 0 });
    expect(run.id).toMatch(/^run_[A-Za-z0-9]{24}$/);
    expect(run.run_id).toBe(run.id);
    expect(res.headers.get("x-run-id")).toBe(run.id);
    expect(run).toMatchObject({ object: "agent.run", status: "completed", model: "svc-fast", file_ids: [fileId], error: null, required_action: null, incomplete_details: null });

    const [call, search, answer, ...more] = run.steps;
    expect(more).toEqual([]);
    expect(call).toMatchObject({ type: "model_call", status: "completed", stop_reason: "tool_calls", index: 0 });
    expect(call.tool_calls).toHaveLength(1);
    expect(call.tool_calls[0].name).toBe("file_search");
    const query = JSON.parse(call.tool_calls[0].arguments).query as string;
    expect(query.length).toBeGreaterThan(0);

    expect(search).toMatchObject({ type: "tool_call", tool_type: "built_in", status: "completed", name: "file_search", call_id: call.tool_calls[0].call_id, error: null, index: 1 });
    const hits = search.result.results as Array<{ file_id: string; filename: string; text: string; line: number; match: string }>;
    expect(hits.length).toBeGreaterThan(0);
    for (const hit of hits) {
      expect(hit.file_id).toBe(fileId);
      expect(hit.filename).toBe("notes.md");
      expect(NOTES).toContain(hit.text);
    }
    expect(hits[0]!.match).toBe("phrase");
    expect(hits[0]!.text.toLowerCase()).toContain(query.toLowerCase());
    // What the model read back is the same result.
    expect(JSON.parse(search.output)).toEqual(search.result);

    expect(answer).toMatchObject({ type: "model_call", status: "completed", stop_reason: "end_turn", tool_calls: [] });
    expect(answer.text.length).toBeGreaterThan(0);
    // The second step read the first one's prompt from the cache, plus the call and its result.
    expect(answer.usage.input_tokens).toBeGreaterThan(call.usage.input_tokens);

    expect(run.output.map((i: { type: string }) => i.type)).toEqual(["function_call", "function_call_output", "message"]);
    expect(run.output[1].output).toBe(search.output);
    expect(run.output_text).toBe(answer.text);
    expect(run.usage).toEqual(sumOfSteps(run));
    expect(run.usage.total_tokens).toBe(run.usage.input_tokens + run.usage.output_tokens);
  });

  it("the audit record keeps run id, status, steps and tokens; no run content is at rest in the data dir", async () => {
    const { res, run } = await runOf({ ...FAST, input: "Tell me about the zebra-quartz ledger", file_ids: [fileId], tool_choice: { type: "file_search" }, temperature: 0 });
    expect(run.status).toBe("completed");
    const requestId = res.headers.get("x-request-id")!;
    const record = (await (await fetch(`${server.url}/v1/audit/${requestId}`, { headers: { authorization: `Bearer ${key}` } })).json()) as Record<string, any>;
    expect(record).toMatchObject({
      request_id: requestId,
      surface: "agent",
      path: "/v1/agent/run",
      status: 200,
      run_id: run.id,
      run_status: "completed",
      run_steps: run.steps.length,
      mode: "fast",
      usage: { input_tokens: run.usage.input_tokens, output_tokens: run.usage.output_tokens, cached_tokens: run.usage.input_tokens_details.cached_tokens },
    });
    // Stateless: the prompt and the answer are nowhere in the data dir (the uploaded file is, by design).
    const answer = run.output_text;
    const walk = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? (name === "files" ? [] : walk(path)) : [path];
      });
    for (const path of walk(dataDir)) {
      const bytes = readFileSync(path);
      expect(bytes.includes("zebra-quartz"), path).toBe(false);
      if (answer.length > 12) expect(bytes.includes(answer), path).toBe(false);
    }
  });

  it("current_time answers in the caller's X-Timezone", async () => {
    const { run } = await runOf(
      { ...FAST, input: "What time is it?", tools: [{ type: "current_time" }], tool_choice: { type: "current_time" }, temperature: 0 },
      { "x-timezone": "Asia/Tokyo" },
    );
    const step = run.steps.find((s) => s.type === "tool_call")!;
    expect(step.result).toMatchObject({ timezone: "Asia/Tokyo", iso: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+09:00$/) });
    expect(Math.abs(step.result.unix - Date.now() / 1000)).toBeLessThan(30);
  });
});

describe("limits", () => {
  it("max_steps ends the run incomplete after that many model steps, each with its tool call", async () => {
    const { run } = await runOf({ ...ENDLESS, input: "Compute", max_steps: 2 });
    expect(run.status).toBe("incomplete");
    expect(run.incomplete_details).toEqual({ reason: "max_steps" });
    expect(run.steps.map((s) => s.type)).toEqual(["model_call", "tool_call", "model_call", "tool_call"]);
    expect(run.usage).toEqual(sumOfSteps(run));
  });

  it("timeout_seconds ends the run incomplete (timeout) on time", async () => {
    const started = performance.now();
    const { run } = await runOf({ ...ENDLESS, input: "Compute", timeout_seconds: 1.5 });
    const elapsed = performance.now() - started;
    expect(run.status).toBe("incomplete");
    expect(run.incomplete_details).toEqual({ reason: "timeout" });
    expect(elapsed).toBeGreaterThanOrEqual(1400);
    expect(elapsed).toBeLessThan(4000);
    expect(run.steps.filter((s) => s.type === "model_call").length).toBeGreaterThan(1);
    expect(run.usage).toEqual(sumOfSteps(run));
  });

  it("a run over the account's --agent-runs-limit (3 here) is a 429 with Retry-After in OpenAI's error format", async () => {
    const started: Array<Awaited<ReturnType<typeof readEvents>>> = [];
    for (const input of ["one", "two", "three"]) {
      const response = await post("/v1/agent/run", { ...ENDLESS, input, stream: true, timeout_seconds: 60 });
      started.push(await readEvents(response, (e) => e.event === "run.created"));
    }
    const fourth = await post("/v1/agent/run", { ...FAST, input: "four" });
    expect(fourth.status).toBe(429);
    expect(Number(fourth.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(fourth.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    expect(await fourth.json()).toEqual({ error: { message: expect.stringContaining("at most 3"), type: "rate_limit_error", param: null, code: "too_many_agent_runs" } });
    // Another account is not affected.
    const other = await post("/v1/agent/run", { ...FAST, input: "mine", tools: [] }, otherKey);
    expect(other.status).toBe(200);
    expect(((await other.json()) as Run).status).toBe("completed");
    for (const { events } of started) expect((await post(`/v1/agent/run/${events[0]!.data.run.id}/cancel`, {})).status).toBe(200);
    for (const { rest } of started) await rest();
  });
});

describe("streaming", () => {
  it("events in order: created (with run_id), in_progress, each step created → deltas → completed, completed last", async () => {
    const res = await post("/v1/agent/run", { ...FAST, input: "Search my notes", stream: true, file_ids: [fileId], tool_choice: { type: "file_search" }, temperature: 0 });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await (await readEvents(res)).rest();
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
    for (const e of events) expect(e.event).toBe(e.data.type);

    const first = events[0]!;
    expect(first.event).toBe("run.created");
    expect(first.data.run).toMatchObject({ id: expect.stringMatching(/^run_/), status: "queued", steps: [] });
    expect(res.headers.get("x-run-id")).toBe(first.data.run.id);
    expect(events[1]!.event).toBe("run.in_progress");
    const last = events.at(-1)!;
    expect(last.event).toBe("run.completed");
    const run = last.data.run as Run;
    expect(run.id).toBe(first.data.run.id);

    // Each step: created, then its deltas, then completed, before the next step is created.
    const names = events.slice(2, -1).map((e) => e.event);
    let open: string | null = null;
    const texts = new Map<string, string>();
    const args = new Map<string, string>();
    for (const e of events.slice(2, -1)) {
      if (e.event === "run.step.created") {
        expect(open).toBeNull();
        open = e.data.step.id;
      } else if (e.event === "run.step.completed") {
        expect(e.data.step.id).toBe(open);
        open = null;
      } else {
        expect(e.data.step_id).toBe(open);
        if (e.event === "run.output_text.delta") texts.set(open!, (texts.get(open!) ?? "") + e.data.delta);
        if (e.event === "run.function_call_arguments.delta") args.set(e.data.call_id, (args.get(e.data.call_id) ?? "") + e.data.delta);
      }
    }
    expect(names.filter((n) => n === "run.step.created")).toHaveLength(run.steps.length);
    const completed = events.filter((e) => e.event === "run.step.completed").map((e) => e.data.step);
    expect(completed).toEqual(run.steps);
    for (const step of run.steps) {
      if (step.type !== "model_call") continue;
      expect(texts.get(step.id) ?? "").toBe(step.text);
      for (const call of step.tool_calls) expect(args.get(call.call_id)).toBe(call.arguments);
    }
    expect(run.usage).toEqual(sumOfSteps(run));
  });
});

describe("cancel", () => {
  it("a second request cancels a run mid-way: both answer within a second, status cancelled with the partial steps", async () => {
    const res = await post("/v1/agent/run", { ...ENDLESS, input: "Keep going", stream: true, timeout_seconds: 60 });
    const reading = await readEvents(res, (e) => e.event === "run.step.completed");
    const runId = reading.events[0]!.data.run.id as string;
    const started = performance.now();
    const cancel = await post(`/v1/agent/run/${runId}/cancel`, {});
    const cancelMs = performance.now() - started;
    expect(cancel.status).toBe(200);
    const cancelled = (await cancel.json()) as Run;
    expect(cancelled).toMatchObject({ id: runId, status: "cancelled" });
    expect(cancelled.steps.length).toBeGreaterThan(0);
    expect(cancelMs).toBeLessThan(1000);
    const events = await reading.rest();
    const streamMs = performance.now() - started;
    expect(streamMs).toBeLessThan(1000);
    const last = events.at(-1)!;
    expect(last.event).toBe("run.cancelled");
    expect(last.data.run).toEqual(cancelled);
    expect(cancelled.usage).toEqual(sumOfSteps(cancelled));
    // Nothing runs after the cancel.
    expect(cancelled.steps.filter((s) => s.status === "in_progress")).toEqual([]);

    // Cancelling it again: it has ended, and the error says so.
    const again = await post(`/v1/agent/run/${runId}/cancel`, {});
    expect(again.status).toBe(409);
    expect(((await again.json()) as any).error).toMatchObject({ code: "run_not_active", param: "run_id" });
  });

  it("a non-streaming run can be cancelled with the id from its X-Run-Id header, sent before the body", async () => {
    const res = await post("/v1/agent/run", { ...ENDLESS, input: "Keep going", timeout_seconds: 60 });
    const runId = res.headers.get("x-run-id")!;
    expect(runId).toMatch(/^run_/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await post(`/v1/agent/run/${runId}/cancel`, {})).status).toBe(200);
    const run = (await res.json()) as Run;
    expect(run).toMatchObject({ id: runId, status: "cancelled" });
  });

  it("another account's run is a 404 (and keeps running); an unknown run is a 404", async () => {
    const res = await post("/v1/agent/run", { ...ENDLESS, input: "Mine", stream: true, timeout_seconds: 60 });
    const reading = await readEvents(res, (e) => e.event === "run.in_progress");
    const runId = reading.events[0]!.data.run.id as string;
    const foreign = await post(`/v1/agent/run/${runId}/cancel`, {}, otherKey);
    expect(foreign.status).toBe(404);
    expect(await foreign.json()).toEqual({ error: { message: `No agent run with id '${runId}'.`, type: "invalid_request_error", param: "run_id", code: "run_not_found" } });
    const unknown = await post("/v1/agent/run/run_doesnotexist000000000000/cancel", {});
    expect(unknown.status).toBe(404);
    expect((await post(`/v1/agent/run/${runId}/cancel`, {})).status).toBe(200);
    expect((await reading.rest()).at(-1)!.event).toBe("run.cancelled");
  });
});

describe("client function tools", () => {
  const weather = { type: "function", name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

  it("ends with requires_action listing the call; the client sends the items back with the output and the next run answers", async () => {
    const input = [{ role: "user", content: "Weather in Oslo?" }];
    const { run } = await runOf({ ...FAST, input, tools: [weather, { type: "calculator" }], tool_choice: { type: "function", name: "get_weather" }, temperature: 0 });
    expect(run.status).toBe("requires_action");
    const [call] = run.required_action.submit_tool_outputs.tool_calls;
    expect(run.required_action.submit_tool_outputs.tool_calls).toHaveLength(1);
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", call_id: expect.stringMatching(/^call_/) });
    expect(run.steps.at(-1)).toMatchObject({ type: "tool_call", tool_type: "function", status: "requires_action", call_id: call.call_id, output: null });
    expect(run.output).toEqual([expect.objectContaining({ type: "function_call", call_id: call.call_id, name: "get_weather", arguments: call.arguments })]);
    // The run has ended on the server: there is nothing to cancel.
    expect((await post(`/v1/agent/run/${run.id}/cancel`, {})).status).toBe(409);

    const { run: next } = await runOf({
      ...FAST,
      input: [...input, ...run.output, { type: "function_call_output", call_id: call.call_id, output: '{"temp": 21}' }],
      tools: [weather, { type: "calculator" }],
      temperature: 0,
    });
    expect(next.status).toBe("completed");
    expect(next.id).not.toBe(run.id);
    expect(next.output_text.length).toBeGreaterThan(0);
    // The call and its output were part of what the model read.
    expect(next.steps[0].usage.input_tokens).toBeGreaterThan(run.steps[0].usage.input_tokens);
  });

  it("an output for a call that was never made is a 400 naming the item", async () => {
    const res = await post("/v1/agent/run", { input: [{ role: "user", content: "Hi" }, { type: "function_call_output", call_id: "call_nope", output: "x" }] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toMatchObject({ type: "invalid_request_error", param: "input[1].call_id" });
  });
});

describe("bad requests", () => {
  it("unknown tool types, foreign or unknown file ids and bad limits are clear 4xx errors before any run starts", async () => {
    const cases: Array<[unknown, number, Record<string, unknown>]> = [
      [{ input: "x", tools: [{ type: "web_search" }] }, 400, { param: "tools[0].type", code: "unsupported_value" }],
      [{ input: "x", file_ids: ["file-unknown"] }, 404, { param: "file_ids[0]", code: "file_not_found" }],
      [{ input: "x", max_steps: 0 }, 400, { type: "invalid_request_error" }],
      [{ input: "x", tool_choice: { type: "read_file" }, tools: [{ type: "calculator" }] }, 400, { param: "tool_choice.type" }],
      [{ input: "x", tools: [{ type: "function", name: "calculator", parameters: { type: "object" } }] }, 400, { code: "duplicate_tool_name" }],
    ];
    for (const [body, status, error] of cases) {
      const res = await post("/v1/agent/run", body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.headers.get("x-run-id")).toBeNull();
      expect(((await res.json()) as any).error).toMatchObject(error);
    }
    // Another account's file is as unknown as a missing one.
    const foreign = await post("/v1/agent/run", { input: "x", file_ids: [fileId] }, otherKey);
    expect(foreign.status).toBe(404);
  });
});
