// The Responses request decoder alone: items → canonical messages, tools, tool choice, formats, reasoning.
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { decodeResponsesRequest } from "../../server/surfaces/responses/decode.js";
import type { ResponsesRequestBody } from "../../server/surfaces/responses/schema.js";

const decode = (body: Record<string, unknown>) => decodeResponsesRequest({ input: "Hi", ...body } as ResponsesRequestBody);

function errorOf(body: Record<string, unknown>): AppError {
  try {
    decode(body);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error("expected the decoder to throw");
}

const weather = { type: "function", name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } };

describe("input", () => {
  it("a string is one user message; instructions come first as a system message", () => {
    const { inference, stream } = decode({ input: "Hello", instructions: "Be brief." });
    expect(stream).toBe(false);
    expect(inference.surface).toBe("responses");
    expect(inference.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Be brief." }] },
      { role: "user", content: [{ type: "text", text: "Hello" }] },
    ]);
  });

  it("message items: easy and typed forms, all four roles, echoed assistant output", () => {
    const { inference } = decode({
      input: [
        { role: "developer", content: "Rules." },
        { type: "message", role: "system", content: [{ type: "input_text", text: "More rules." }] },
        { role: "user", content: [{ type: "input_text", text: "Q1" }, { type: "input_text", text: "Q2" }] },
        {
          type: "message",
          id: "msg_1",
          role: "assistant",
          status: "completed",
          content: [
            { type: "output_text", text: "A1", annotations: [] },
            { type: "refusal", refusal: " no" },
          ],
        },
        { role: "user", content: "Q3" },
      ],
    });
    expect(inference.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Rules." }] },
      { role: "system", content: [{ type: "text", text: "More rules." }] },
      { role: "user", content: [{ type: "text", text: "Q1" }, { type: "text", text: "Q2" }] },
      { role: "assistant", content: [{ type: "text", text: "A1 no" }] },
      { role: "user", content: [{ type: "text", text: "Q3" }] },
    ]);
  });

  it("a reasoning item, a message and consecutive calls form one assistant turn; outputs become tool messages", () => {
    const { inference } = decode({
      input: [
        { role: "user", content: "Weather in Oslo and Rome?" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "two cities" }] },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}', status: "completed" },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: '{"city":"Rome"}' },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "rain" }] },
      ],
      tools: [weather],
    });
    expect(inference.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Weather in Oslo and Rome?" }] },
      {
        role: "assistant",
        reasoning: "two cities",
        content: [{ type: "text", text: "Checking." }],
        toolCalls: [
          { id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
          { id: "call_2", name: "get_weather", arguments: '{"city":"Rome"}' },
        ],
      },
      { role: "tool", toolCallId: "call_1", content: [{ type: "text", text: "sunny" }] },
      { role: "tool", toolCallId: "call_2", content: [{ type: "text", text: "rain" }] },
    ]);
  });

  it("a function_call_output with a name and no call_id (Codex's thread goal) is read as its own call and result", () => {
    const { inference } = decode({
      input: [
        { role: "user", content: "Fix the bug." },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{}" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
        { type: "function_call_output", id: "fco_1", name: "goal_objective", namespace: "agent", output: "Fix the bug" },
        { type: "function_call_output", name: "note", output: [{ type: "input_text", text: "plain" }] },
      ],
      tools: [weather],
    });
    expect(inference.messages.slice(3)).toEqual([
      { role: "assistant", content: [], toolCalls: [{ id: "uncalled_fco_1", name: "agent.goal_objective", arguments: "{}" }] },
      { role: "tool", toolCallId: "uncalled_fco_1", content: [{ type: "text", text: "Fix the bug" }] },
      { role: "assistant", content: [], toolCalls: [{ id: "uncalled_4", name: "note", arguments: "{}" }] },
      { role: "tool", toolCallId: "uncalled_4", content: [{ type: "text", text: "plain" }] },
    ]);
    // Without a name it is still an output that answers nothing.
    expect(errorOf({ input: [{ type: "function_call_output", output: "x" }] }).param).toBe("input[0].call_id");
  });

  it("a reasoning item that no assistant item follows is dropped", () => {
    const { inference } = decode({ input: [{ type: "reasoning", summary: [{ type: "summary_text", text: "x" }] }, { role: "user", content: "Hi" }] });
    expect(inference.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Hi" }] }]);
  });

  it("custom tool calls from earlier turns are shown as calls with {input}; hosted-tool items are left out", () => {
    const { inference } = decode({
      input: [
        { role: "user", content: "Patch it" },
        { type: "custom_tool_call", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch" },
        { type: "custom_tool_call_output", call_id: "call_p", output: "Done" },
        { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "x" } },
        { type: "local_shell_call", id: "ls_1", call_id: "call_s", action: { type: "exec", command: ["ls"] }, status: "completed" },
        { type: "local_shell_call_output", id: "lso_1", call_id: "call_s", output: "a.txt" },
      ],
    });
    expect(inference.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Patch it" }] },
      { role: "assistant", content: [], toolCalls: [{ id: "call_p", name: "apply_patch", arguments: '{"input":"*** Begin Patch"}' }] },
      { role: "tool", toolCallId: "call_p", content: [{ type: "text", text: "Done" }] },
    ]);
  });

  it("input_file and input_image parts become canonical file and image parts that know where they were", () => {
    const { inference } = decode({
      input: [
        {
          role: "user",
          content: [
            { type: "input_file", filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERg==" },
            { type: "input_file", filename: "notes.md", file_data: "aGVsbG8=" },
            { type: "input_file", file_id: "file-abc" },
            { type: "input_file", file_url: "https://example.com/x.pdf" },
            { type: "input_image", detail: "auto", image_url: "data:image/png;base64,iVBO" },
            { type: "input_image", detail: "auto", image_url: "https://example.com/cat.png" },
          ],
        },
      ],
    });
    const at = (j: number) => `input[0].content[${j}]`;
    expect(inference.messages[0]!.content).toEqual([
      { type: "file", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERg==" }, filename: "a.pdf", param: at(0) },
      { type: "file", source: { kind: "base64", mediaType: "application/octet-stream", data: "aGVsbG8=" }, filename: "notes.md", param: at(1) },
      { type: "file", source: { kind: "file_id", fileId: "file-abc" }, param: at(2) },
      { type: "file", source: { kind: "url", url: "https://example.com/x.pdf" }, param: at(3) },
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBO" }, param: at(4) },
      { type: "image", source: { kind: "url", url: "https://example.com/cat.png" }, param: at(5) },
    ]);
  });

  it.each([
    [{ input: [{ role: "wizard", content: "x" }] }, "input[0].role"],
    [{ input: [{ role: "user", content: 42 }] }, "input[0].content"],
    [{ input: [{ role: "user", content: [{ type: "input_text" }] }] }, "input[0].content[0].text"],
    [{ input: [{ role: "user", content: [{ type: "text", text: "x" }] }] }, "input[0].content[0].type"],
    [{ input: [{ role: "assistant", content: [{ type: "input_image", image_url: "x" }] }] }, "input[0].content[0].type"],
    [{ input: [{ role: "user", content: [{ type: "input_file", file_data: "aGk=" }] }] }, "input[0].content[0].filename"],
    [{ input: [{ role: "user", content: [{ type: "input_file" }] }] }, "input[0].content[0].file_data"],
    [{ input: [{ role: "user", content: [{ type: "input_image", detail: "auto" }] }] }, "input[0].content[0].image_url"],
    [{ input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
    [{ input: [{ type: "function_call", call_id: "c", arguments: "{}" }] }, "input[0].name"],
    [{ input: [{ type: "function_call", call_id: "c", name: "f", arguments: { a: 1 } }] }, "input[0].arguments"],
    [{ input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{}" }] }, "input[0]"],
    [{ input: [{ type: "function_call_output", call_id: "ghost", output: "x" }] }, "input[0].call_id"],
    [
      {
        input: [
          { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
          { type: "function_call_output", call_id: "c", output: "x" },
          { type: "function_call_output", call_id: "c", output: "again" },
        ],
      },
      "input[2].call_id",
    ],
    [
      {
        input: [
          { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
          { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
        ],
      },
      "input[1].call_id",
    ],
    [{ input: [{ type: "function_call", call_id: "c", name: "f" }, { type: "function_call_output", call_id: "c", output: 5 }] }, "input[1].output"],
    [{ input: [{ type: "item_reference", id: "msg_1" }] }, "input[0]"],
    [{ input: [{ type: "hologram" }] }, "input[0].type"],
    [{ input: [{ content: "no role or type" }] }, "input[0].type"],
  ])("%j → 400 naming %s", (body, param) => {
    const err = errorOf(body);
    expect(err.status).toBe(400);
    expect(err.param).toBe(param);
    expect(err.message.length).toBeGreaterThan(10);
  });
});

describe("tools and tool_choice", () => {
  it("keeps function tools, leaves out every type the service cannot run, and echoes what the model saw", () => {
    const { inference, echo } = decode({
      tools: [
        { type: "custom", name: "apply_patch", format: { type: "grammar", syntax: "lark", definition: "start: x" } },
        weather,
        { type: "namespace", name: "multi_agent", tools: [{ type: "function", name: "spawn", parameters: {} }] },
        { type: "web_search", external_web_access: false },
        { type: "function", name: "no_params", parameters: null, strict: false },
        { type: "mcp", server_label: "x", server_url: "https://example.com" },
        { type: "local_shell" },
        { type: "something_new" },
      ],
    });
    expect(inference.tools).toEqual([
      // Strict unless a tool says `strict: false`, as on OpenAI's Responses API.
      { name: "get_weather", description: "Weather", parameters: weather.parameters, param: "tools[1].parameters", strict: true },
      // A namespace's functions are offered under their namespaced names.
      { name: "multi_agent.spawn", parameters: {}, param: "tools[2].tools[0].parameters", strict: true },
      { name: "no_params", parameters: { type: "object", properties: {} }, param: "tools[4].parameters" },
    ]);
    expect(inference.toolChoice).toEqual({ type: "auto" });
    expect(echo.tools).toEqual([
      { type: "function", name: "get_weather", description: "Weather", parameters: weather.parameters, strict: null },
      { type: "function", name: "multi_agent.spawn", description: null, parameters: {}, strict: null },
      { type: "function", name: "no_params", description: null, parameters: null, strict: false },
    ]);
    expect([...echo.namespaced]).toEqual([["multi_agent.spawn", { namespace: "multi_agent", name: "spawn" }]]);
  });

  it("maps auto, none, required, a named function and allowed_tools", () => {
    const tools = [weather, { type: "function", name: "get_time" }, { type: "custom", name: "apply_patch" }];
    expect(decode({ tools, tool_choice: "none" }).inference.toolChoice).toEqual({ type: "none" });
    expect(decode({ tools, tool_choice: "required" }).inference.toolChoice).toEqual({ type: "required" });
    const named = decode({ tools, tool_choice: { type: "function", name: "get_time" } });
    expect(named.inference.toolChoice).toEqual({ type: "tool", name: "get_time" });
    expect(named.echo.toolChoice).toEqual({ type: "function", name: "get_time" });
    const allowed = decode({
      tools,
      tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "get_time" }, { type: "custom", name: "apply_patch" }] },
    });
    expect(allowed.inference.tools.map((t) => t.name)).toEqual(["get_time"]);
    expect(allowed.inference.toolChoice).toEqual({ type: "required" });
    expect(allowed.echo.tools.map((t) => t.name)).toEqual(["get_time"]);
  });

  it.each([
    [{ tools: [{ type: "function", name: "bad name!" }] }, "tools[0].name"],
    [{ tools: [{ type: "function" }] }, "tools[0].name"],
    [{ tools: [weather, weather] }, "tools[1].name"],
    [{ tools: [{ type: "function", name: "f", parameters: "object" }] }, "tools[0].parameters"],
    [{ tools: [{ type: "function", name: "f", description: 5 }] }, "tools[0].description"],
    [{ tool_choice: "required" }, "tool_choice"],
    [{ tools: [{ type: "custom", name: "apply_patch" }], tool_choice: "required" }, "tool_choice"],
    [{ tool_choice: "sometimes" }, "tool_choice"],
    [{ tools: [weather], tool_choice: { type: "function", name: "ghost" } }, "tool_choice.name"],
    [{ tools: [weather], tool_choice: { type: "function" } }, "tool_choice.name"],
    [{ tools: [{ type: "custom", name: "apply_patch" }], tool_choice: { type: "custom", name: "apply_patch" } }, "tool_choice.type"],
    [{ tool_choice: { type: "web_search" } }, "tool_choice.type"],
    [{ tools: [weather], tool_choice: { type: "allowed_tools", mode: "sometimes", tools: [] } }, "tool_choice.mode"],
    [{ tools: [weather], tool_choice: { type: "allowed_tools", mode: "auto" } }, "tool_choice.tools"],
    [{ tools: [weather], tool_choice: { type: "allowed_tools", mode: "auto", tools: [{ type: "function", name: "ghost" }] } }, "tool_choice.tools[0].name"],
    [{ tools: [weather], tool_choice: { type: "allowed_tools", mode: "required", tools: [] } }, "tool_choice.tools"],
  ])("%j → 400 naming %s", (body, param) => {
    const err = errorOf(body);
    expect(err.status).toBe(400);
    expect(err.param).toBe(param);
  });
});

describe("text.format, reasoning, sampling and model", () => {
  it("maps text.format to the canonical output format, naming the schema for errors", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    expect(decode({}).inference.output).toEqual({ type: "text" });
    expect(decode({ text: { format: { type: "text" } } }).inference.output).toEqual({ type: "text" });
    expect(decode({ text: { format: { type: "json_object" } } }).inference.output).toEqual({ type: "json_object" });
    const structured = decode({ text: { format: { type: "json_schema", name: "city", schema, strict: true } } });
    expect(structured.inference.output).toEqual({ type: "json_schema", name: "city", schema, strict: true, param: "text.format.schema" });
    expect(structured.echo.textFormat).toEqual({ type: "json_schema", name: "city", schema, strict: true });
    expect(errorOf({ text: { format: { type: "json_schema", name: "x" } } }).param).toBe("text.format.schema");
    expect(errorOf({ text: { format: { type: "xml" } } }).param).toBe("text.format.type");
  });

  it("maps reasoning.effort through the shared table; unknown values think", () => {
    const cases: Array<[string | undefined | null, "fast" | "thinking", number]> = [
      ["none", "fast", 0],
      ["minimal", "fast", 0],
      ["low", "thinking", 1024],
      ["medium", "thinking", 4096],
      ["high", "thinking", 16384],
      ["xhigh", "thinking", 32768],
      ["max", "thinking", 65536],
      ["galaxy-brain", "thinking", 4096],
      [null, "thinking", 4096],
      [undefined, "thinking", 4096],
    ];
    for (const [effort, mode, budget] of cases) {
      const { inference } = decode(effort === undefined ? {} : { reasoning: { effort } });
      expect(inference.reasoning).toMatchObject({ mode, budgetTokens: budget });
    }
    expect(decode({ model: "svc-fast" }).inference.reasoning.mode).toBe("fast");
    expect(decode({ model: "svc-fast", reasoning: { effort: "high" } }).inference.reasoning.mode).toBe("thinking");
  });

  it("passes max_output_tokens, sampling and the seed extension; echoes the effective sampling", () => {
    const { inference, echo } = decode({ max_output_tokens: 99, temperature: 0.2, top_p: 0.5, seed: 7, metadata: { user: "u1" }, parallel_tool_calls: false, stream: true });
    expect(inference.maxTokens).toBe(99);
    expect(inference.sampling).toEqual({ temperature: 0.2, topP: 0.5, seed: 7 });
    expect(inference.parallelToolCalls).toBe(false);
    expect(inference.stopSequences).toEqual([]);
    expect(echo).toMatchObject({ maxOutputTokens: 99, temperature: 0.2, topP: 0.5, metadata: { user: "u1" }, parallelToolCalls: false });
    const defaults = decode({});
    expect(defaults.echo).toMatchObject({ temperature: 0.7, topP: 0.95, maxOutputTokens: null, metadata: {}, instructions: null, toolChoice: "auto" });
    expect(defaults.inference.maxTokens).toBeUndefined();
  });

  it("accepts svc-preview, svc and the first release's ids; anything else is 404 model_not_found", () => {
    for (const model of ["svc-preview", "svc", "svc-thinking", null, undefined]) expect(() => decode({ model })).not.toThrow();
    const err = errorOf({ model: "gpt-4o" });
    expect(err.status).toBe(404);
    expect(err.code).toBe("model_not_found");
  });
});
