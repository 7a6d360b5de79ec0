// `svc serve` on the generated model, driven with the official openai client's Responses API.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { makePdf } from "../support/make-pdf.js";
import { createKey, runSvc, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let client: OpenAI;
let tracer: OpenAI;
let dataDir: string;
const greedy = greedyTexts();

type Create = OpenAI.Responses.ResponseCreateParamsNonStreaming;
/** The server's `seed` extension (as on Chat): reproducible sampling for the tool tests. */
const seeded = (params: Create, seed: number) => ({ ...params, seed }) as Create;

function outputsOf<T extends OpenAI.Responses.ResponseOutputItem["type"]>(res: OpenAI.Responses.Response, type: T) {
  return res.output.filter((item): item is Extract<OpenAI.Responses.ResponseOutputItem, { type: T }> => item.type === type);
}

beforeAll(async () => {
  dataDir = tempDataDir();
  const key = createKey(dataDir);
  const traceKey = createKey(dataDir, "--name", "tracer", "--reasoning-trace");
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  tracer = new OpenAI({ apiKey: traceKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

describe("responses.create", () => {
  it("thinks, then answers: a message with output_text, reasoning counted in usage, no reasoning item", async () => {
    const res = await client.responses.create({ model: "svc", input: "Hello", temperature: 0 });
    expect(res.id).toMatch(/^resp_/);
    expect(res.object).toBe("response");
    expect(res.status).toBe("completed");
    expect(res.model).toBe("svc-thinking");
    expect(res.output_text).toBe(greedy.answer.trim());
    expect(res.output.map((i) => i.type)).toEqual(["message"]);
    expect(outputsOf(res, "message")[0]!.id).toMatch(/^msg_/);
    expect(res.usage!.output_tokens_details.reasoning_tokens).toBe(5);
    expect(res.usage!.output_tokens).toBeGreaterThan(5);
    expect(res.usage!.total_tokens).toBe(res.usage!.input_tokens + res.usage!.output_tokens);
    expect(res.usage!.input_tokens_details.cached_tokens).toBeLessThan(res.usage!.input_tokens);
    expect((res as unknown as { store: boolean }).store).toBe(false);
    expect(res._request_id).toMatch(/^req_/);
  });

  it("instructions and a message list; reasoning effort none answers in the fast mode", async () => {
    const res = await client.responses.create({
      model: "svc-preview",
      instructions: "Answer briefly.",
      input: [
        { role: "developer", content: "Use plain words." },
        { role: "user", content: [{ type: "input_text", text: "Hello" }] },
      ],
      reasoning: { effort: "none" },
      temperature: 0,
    });
    expect(res.model).toBe("svc-fast");
    expect(res.instructions).toBe("Answer briefly.");
    expect(res.output_text).toBe(greedy.answer.trim());
    expect(res.usage!.output_tokens_details.reasoning_tokens).toBe(0);
  });

  it("max_output_tokens cuts the answer: status incomplete, reason max_output_tokens", async () => {
    const res = await client.responses.create({ model: "svc", input: "Hi", temperature: 0, reasoning: { effort: "none" }, max_output_tokens: 2 });
    expect(res.status).toBe("incomplete");
    expect(res.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(res.usage!.output_tokens).toBe(2);
    expect(res.output_text).toBe(greedy.answer.trim().split(" ").slice(0, 2).join(" "));
  });

  it("an input_file PDF goes through ingest: the model reads its text", async () => {
    const pdf = makePdf(["Invoice 42", "Total 99 EUR"]).toString("base64");
    const plain = await client.responses.create({ model: "svc", input: "Summarise", reasoning: { effort: "none" }, temperature: 0 });
    const withFile = await client.responses.create({
      model: "svc",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "Summarise" },
            { type: "input_file", filename: "invoice.pdf", file_data: `data:application/pdf;base64,${pdf}` },
          ],
        },
      ],
      reasoning: { effort: "none" },
      temperature: 0,
    });
    expect(withFile.status).toBe("completed");
    // "Invoice 42 / Total 99 EUR" and the file wrapper are in the prompt: tens of tokens more.
    expect(withFile.usage!.input_tokens).toBeGreaterThan(plain.usage!.input_tokens + 30);
  });
});

describe("streaming", () => {
  it("the SDK's stream helper: text deltas and finalResponse()", async () => {
    const stream = client.responses.stream({ model: "svc", input: "Hello", temperature: 0 });
    const deltas: string[] = [];
    stream.on("response.output_text.delta", (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();
    expect(final.status).toBe("completed");
    expect(final.output_text).toBe(greedy.answer.trim());
    expect(deltas.join("")).toBe(greedy.answer.trim());
    expect(final.usage!.output_tokens_details.reasoning_tokens).toBe(5);
    expect(final.output.map((i) => i.type)).toEqual(["message"]);
  });

  it("raw stream: created, in_progress, item and part added, deltas, the .done events, completed; sequence numbers", async () => {
    const stream = await client.responses.create({ model: "svc", input: "Hello", temperature: 0, stream: true });
    const seen: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) seen.push(event);
    const types = seen.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    expect(types.slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]);
    expect(new Set(types.slice(4, -4))).toEqual(new Set(["response.output_text.delta"]));
    expect(seen.map((e) => e.sequence_number)).toEqual(seen.map((_, i) => i));
    const text = seen.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : [])).join("");
    expect(text).toBe(greedy.answer.trim());
    const completed = seen.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output).toHaveLength(1);
    expect(completed.response.usage!.total_tokens).toBeGreaterThan(0);
  });
});

describe("reasoning trace, per key", () => {
  it("a key with the trace flag gets a reasoning item whose summary is the thought, streamed before the answer", async () => {
    const res = await tracer.responses.create({ model: "svc", input: "Hello", temperature: 0 });
    const reasoning = outputsOf(res, "reasoning");
    expect(res.output.map((i) => i.type)).toEqual(["reasoning", "message"]);
    expect(reasoning[0]!.id).toMatch(/^rs_/);
    expect(reasoning[0]!.summary).toEqual([{ type: "summary_text", text: greedy.thought.trim() }]);
    expect(res.output_text).toBe(greedy.answer.trim());

    const stream = tracer.responses.stream({ model: "svc", input: "Hello", temperature: 0 });
    const order: string[] = [];
    let summary = "";
    stream.on("response.reasoning_summary_text.delta", (e) => {
      order.push("summary");
      summary += e.delta;
    });
    stream.on("response.output_text.delta", () => order.push("text"));
    const final = await stream.finalResponse();
    expect(summary).toBe(greedy.thought.trim());
    expect(order[0]).toBe("summary");
    expect(order.lastIndexOf("summary")).toBeLessThan(order.indexOf("text"));
    expect(final.output.map((i) => i.type)).toEqual(["reasoning", "message"]);
  });

  it("svc keys update KEY_ID --reasoning-trace off|on switches it for the running server", async () => {
    const keys = JSON.parse(runSvc(["keys", "list", "--json", "--data-dir", dataDir]).stdout) as Array<{ id: string; name: string | null }>;
    const id = keys.find((k) => k.name === "tracer")!.id;
    const update = (value: string) => expect(runSvc(["keys", "update", id, "--reasoning-trace", value, "--data-dir", dataDir]).status).toBe(0);
    update("off");
    try {
      const off = await tracer.responses.create({ model: "svc", input: "Hello", temperature: 0 });
      expect(off.output.map((i) => i.type)).toEqual(["message"]);
      expect(off.usage!.output_tokens_details.reasoning_tokens).toBe(5);
    } finally {
      update("on");
    }
    const on = await tracer.responses.create({ model: "svc", input: "Hello", temperature: 0 });
    expect(on.output.map((i) => i.type)).toEqual(["reasoning", "message"]);
  });
});

describe("tools", () => {
  const weather: OpenAI.Responses.FunctionTool = {
    type: "function",
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"] },
    strict: true,
  };
  const time: OpenAI.Responses.FunctionTool = {
    type: "function",
    name: "get_time",
    parameters: { type: "object", properties: { zone: { enum: ["utc", "local"] } }, required: ["zone"] },
    strict: null,
  };

  it("a named tool_choice forces that call: a function_call item with call_id, name and schema-valid arguments", async () => {
    const res = await client.responses.create(
      seeded({ model: "svc", input: "Weather in Oslo?", tools: [weather, time], tool_choice: { type: "function", name: "get_time" }, temperature: 1 }, 5),
    );
    const [call, ...more] = outputsOf(res, "function_call");
    expect(more).toHaveLength(0);
    expect(res.status).toBe("completed");
    expect(call!.id).toMatch(/^fc_/);
    expect(call!.call_id).toMatch(/^call_/);
    expect(call!.name).toBe("get_time");
    expect(validateJsonAgainstSchema(time.parameters!, JSON.parse(call!.arguments))).toEqual({ valid: true });
  });

  it("required forces some call in both modes; streamed with the helper too", async () => {
    for (const effort of ["none", "medium"] as const) {
      const res = await client.responses.create({ model: "svc", input: "Weather?", tools: [weather], tool_choice: "required", reasoning: { effort }, temperature: 0 });
      const call = outputsOf(res, "function_call")[0]!;
      expect(call.name).toBe("get_weather");
      expect(validateJsonAgainstSchema(weather.parameters!, JSON.parse(call.arguments))).toEqual({ valid: true });
    }
    const stream = client.responses.stream({ model: "svc", input: "Weather?", tools: [weather], tool_choice: "required", temperature: 0 });
    let args = "";
    stream.on("response.function_call_arguments.delta", (e) => (args += e.delta));
    const final = await stream.finalResponse();
    const call = outputsOf(final, "function_call")[0]!;
    expect(call.name).toBe("get_weather");
    expect(args).toBe(call.arguments);
    expect(JSON.parse(call.arguments)).toHaveProperty("city");
  });

  it("auto lets the model decide; a function_call_output round trip then answers", async () => {
    let called: OpenAI.Responses.Response | undefined;
    let answered = 0;
    for (let seed = 1; seed <= 40 && (!called || answered === 0); seed++) {
      const res = await client.responses.create(seeded({ model: "svc", input: "Weather in Oslo?", tools: [weather], tool_choice: "auto", temperature: 1 }, seed));
      if (outputsOf(res, "function_call").length > 0) called ??= res;
      else {
        answered++;
        expect(res.output.map((i) => i.type)).toEqual(["message"]);
      }
    }
    expect(called).toBeDefined();
    expect(answered).toBeGreaterThan(0);
    const call = outputsOf(called!, "function_call")[0]!;
    expect(validateJsonAgainstSchema(weather.parameters!, JSON.parse(call.arguments))).toEqual({ valid: true });

    const second = await client.responses.create({
      model: "svc",
      input: [
        { role: "user", content: "Weather in Oslo?" },
        ...(called!.output as OpenAI.Responses.ResponseInputItem[]),
        { type: "function_call_output", call_id: call.call_id, output: '{"temp": 21, "sky": "clear"}' },
      ],
      tools: [weather],
      tool_choice: "none",
      temperature: 0,
    });
    expect(second.status).toBe("completed");
    expect(second.output_text).toBe(greedy.answer.trim());
    // The call and its result are part of the prompt the model saw.
    expect(second.usage!.input_tokens).toBeGreaterThan(called!.usage!.input_tokens + 15);

    for (let seed = 1; seed <= 10; seed++) {
      const res = await client.responses.create(seeded({ model: "svc", input: "Weather?", tools: [weather], tool_choice: "none", temperature: 1 }, seed));
      expect(outputsOf(res, "function_call")).toHaveLength(0);
    }
  });

  it("tools the service cannot run (custom, namespace, web_search) are accepted and left out", async () => {
    const res = await client.responses.create({
      model: "svc",
      input: "Hello",
      tools: [
        { type: "custom", name: "apply_patch", description: "Patch files" },
        { type: "web_search" },
        weather,
      ],
      tool_choice: "none",
      temperature: 0,
    });
    expect(res.status).toBe("completed");
    expect(res.tools.map((t) => t.type)).toEqual(["function"]);
  });

  it("an output for an unknown call is a 400 naming the item", async () => {
    const err = await client.responses
      .create({ model: "svc", input: [{ role: "user", content: "x" }, { type: "function_call_output", call_id: "call_ghost", output: "r" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("input[1].call_id");
  });
});

describe("structured output", () => {
  const schema = {
    type: "object",
    properties: {
      city: { type: "string" },
      unit: { enum: ["c", "f"] },
      days: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 },
    },
    required: ["city", "unit", "days"],
    additionalProperties: false,
  };

  it("text.format json_schema yields JSON that satisfies the schema, in both modes", async () => {
    for (const [seed, effort] of [[1, "none"], [2, "medium"]] as const) {
      const res = await client.responses.create(
        seeded({ model: "svc", input: "Forecast", temperature: 1, reasoning: { effort }, text: { format: { type: "json_schema", name: "forecast", schema, strict: true } } }, seed),
      );
      expect(res.status).toBe("completed");
      expect(validateJsonAgainstSchema(schema, JSON.parse(res.output_text))).toEqual({ valid: true });
      expect(res.text?.format).toMatchObject({ type: "json_schema", name: "forecast" });
    }
  });

  it("json_object yields an object; an unsupported schema is a 400 naming text.format.schema", async () => {
    const res = await client.responses.create({ model: "svc", input: "JSON", temperature: 1, text: { format: { type: "json_object" } } });
    const value = JSON.parse(res.output_text);
    expect(typeof value).toBe("object");
    expect(Array.isArray(value)).toBe(false);
    const err = await client.responses
      .create({ model: "svc", input: "x", text: { format: { type: "json_schema", name: "x", schema: { $ref: "https://example.com/s.json" } } } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("text.format.schema");
  });
});

describe("stateless: the three 400s through the SDK", () => {
  it.each([
    [{ store: true }, "store"],
    [{ previous_response_id: "resp_123" }, "previous_response_id"],
    [{ background: true }, "background"],
  ] as const)("%j → BadRequestError naming %s", async (extra, param) => {
    const err = await client.responses.create({ model: "svc", input: "Hi", ...extra }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const bad = err as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.status).toBe(400);
    expect(bad.param).toBe(param);
    expect(bad.type).toBe("invalid_request_error");
    expect(bad.message).toMatch(/stateless|stored/);
    expect(bad.requestID).toMatch(/^req_/);
  });

  it("401 AuthenticationError with code invalid_api_key", async () => {
    const bad = new OpenAI({ apiKey: "sk-svc-" + "0".repeat(32), baseURL: `${server.url}/v1`, maxRetries: 0 });
    const err = await bad.responses.create({ model: "svc", input: "x" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe("invalid_api_key");
  });
});
