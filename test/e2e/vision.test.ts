// Images into a vision model, end to end: `svc serve` on the generated text model with the generated tiny
// projector beside it (resources/test-model/tiny-vision.ts), driven with the official clients. The image
// goes through llama.cpp's real vision encoder in the vision process: it raises prompt_tokens by exactly
// the encoder's token count, svc_trace says the vision path ran, and the same request again is served from
// the KV cache.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI, { toFile } from "openai";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyVisionProjector, TINY_VISION_IMAGE_TOKENS, writeTinyVisionModel } from "../../resources/test-model/tiny-vision.js";
import { blankPng, captionMp4, iworkZip, scannedPdf, textPng } from "../support/file-fixtures.js";
import { startModelServer } from "../support/model-server.js";
import { createKey, runSvc, runSvcAsync, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let client: OpenAI;
let key: string;
let png: Buffer;
let dataUrl: string;
const question = "What is in this picture?";

type Traced = { svc_trace?: { images?: { count: number; read_by: string; tokens: number | null } } };

beforeAll(async () => {
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  const model = writeTinyVisionModel(tempDataDir(), readFileSync(inject("tinyModelPath")));
  server = await startSvc({ model, dataDir, args: ["--sequences", "1", "--context-size", "2048"] });
  client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  png = await sharp({ create: { width: 1024, height: 768, channels: 3, background: { r: 200, g: 40, b: 90 } } }).png().toBuffer();
  dataUrl = `data:image/png;base64,${png.toString("base64")}`;
}, 120_000);
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

const chat = (content: OpenAI.Chat.ChatCompletionContentPart[], extra: Record<string, unknown> = {}) =>
  client.chat.completions.create({ model: "svc", max_tokens: 8, temperature: 0, messages: [{ role: "user", content }], ...extra } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);

describe("Chat", () => {
  it("an image_url data URL reaches the vision encoder: prompt_tokens rise by its token count, svc_trace says so", async () => {
    const plain = await chat([{ type: "text", text: question }]);
    const image = await chat([{ type: "text", text: question }, { type: "image_url", image_url: { url: dataUrl } }], { glassbox: { enabled: true } });
    // The image stands where its marker is, in its own paragraph: the text around it is the same but for
    // the two newlines that set it apart ("\n\n" after the question, one token in this vocabulary: 2 bytes).
    const difference = image.usage!.prompt_tokens - plain.usage!.prompt_tokens;
    expect(difference - TINY_VISION_IMAGE_TOKENS).toBeGreaterThanOrEqual(0);
    expect(difference - TINY_VISION_IMAGE_TOKENS).toBeLessThanOrEqual(2);
    expect((image as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
    expect(image.choices[0]!.finish_reason).toBe("length");
    const answered = await chat([{ type: "text", text: question }, { type: "image_url", image_url: { url: dataUrl } }], { max_tokens: 64, reasoning_effort: "none" });
    expect(answered.choices[0]!.message.content).toMatch(/\w/);
    expect(answered.model).toBe("svc-fast");
  });

  it("the same request again is a cache hit: all but the last prompt token come from the KV cache", async () => {
    const body: OpenAI.Chat.ChatCompletionContentPart[] = [{ type: "text", text: "Describe it." }, { type: "image_url", image_url: { url: dataUrl } }];
    await chat(body);
    const again = await chat(body);
    expect(again.usage!.prompt_tokens_details?.cached_tokens).toBe(again.usage!.prompt_tokens - 1);
    // Another image at the same place is not served from the cache past the text before it.
    const other = await sharp({ create: { width: 300, height: 200, channels: 3, background: { r: 10, g: 200, b: 30 } } }).png().toBuffer();
    const changed = await chat([{ type: "text", text: "Describe it." }, { type: "image_url", image_url: { url: `data:image/png;base64,${other.toString("base64")}` } }]);
    expect(changed.usage!.prompt_tokens_details?.cached_tokens).toBeLessThan(changed.usage!.prompt_tokens - TINY_VISION_IMAGE_TOKENS);
  });

  it("streams the answer with usage, as a text answer does", async () => {
    const stream = await client.chat.completions.create({
      model: "svc",
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl } }] }],
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(usage!.prompt_tokens).toBeGreaterThan(TINY_VISION_IMAGE_TOKENS);
    expect(usage!.completion_tokens).toBeGreaterThan(0);
    expect(typeof text).toBe("string");
  });

  it("stop sequences end the answer on the vision path; structured output holds", async () => {
    const image: OpenAI.Chat.ChatCompletionContentPart = { type: "image_url", image_url: { url: dataUrl } };
    const free = await chat([image], { max_tokens: 32, reasoning_effort: "none" });
    // Fast mode: no thought in the answer (the model here opens one after every prompt unless kept from it).
    expect(free.choices[0]!.message.content).not.toMatch(/<think>|<\/think>/);
    expect((free.usage as { reasoning_tokens?: number }).reasoning_tokens ?? 0).toBe(0);
    const words = free.choices[0]!.message.content!.trim().split(" ");
    expect(words.length).toBeGreaterThan(2);
    const stopped = await chat([image], { max_tokens: 32, reasoning_effort: "none", stop: [` ${words[2]}`] });
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    expect(stopped.choices[0]!.message.content).toBe(words.slice(0, 2).join(" "));
    const json = await chat([image], { max_tokens: 64, reasoning_effort: "none", response_format: { type: "json_schema", json_schema: { name: "r", strict: true, schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false } } } });
    expect(Number.isInteger((JSON.parse(json.choices[0]!.message.content!) as { n: number }).n)).toBe(true);
  });

  it("tool calls with an image: the model sees it and writes the call (forced by name, required, streamed); X-Image-Input: vision is served", async () => {
    const image: OpenAI.Chat.ChatCompletionContentPart = { type: "image_url", image_url: { url: dataUrl } };
    const tools: OpenAI.Chat.ChatCompletionTool[] = [
      { type: "function", function: { name: "describe", parameters: { type: "object", properties: { colour: { type: "string", enum: ["red", "green"] }, count: { type: "integer" } }, required: ["colour", "count"], additionalProperties: false }, strict: true } },
      { type: "function", function: { name: "crop", parameters: { type: "object", properties: { x: { type: "integer" } }, required: ["x"], additionalProperties: false }, strict: true } },
    ];
    const named = await chat([{ type: "text", text: question }, image], { max_tokens: 160, reasoning_effort: "none", tools, tool_choice: { type: "function", function: { name: "describe" } }, glassbox: { enabled: true } });
    expect((named as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
    expect(named.choices[0]!.finish_reason).toBe("tool_calls");
    const [call] = named.choices[0]!.message.tool_calls! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    expect(call!.function.name).toBe("describe");
    expect(call!.id).toMatch(/^call_/);
    const args = JSON.parse(call!.function.arguments) as { colour: string; count: number };
    expect(["red", "green"]).toContain(args.colour);
    expect(Number.isInteger(args.count)).toBe(true);
    expect(named.usage!.completion_tokens).toBeGreaterThan(3);
    // Required: a call to one of the tools, after a thought when thinking; the arguments follow that tool's schema.
    const required = await chat([image], { max_tokens: 96, reasoning_effort: "low", max_reasoning_tokens: 4, tools, tool_choice: "required" });
    const [any] = required.choices[0]!.message.tool_calls! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    expect(["describe", "crop"]).toContain(any!.function.name);
    const parsed = JSON.parse(any!.function.arguments) as Record<string, unknown>;
    expect(Object.keys(parsed).sort()).toEqual(any!.function.name === "describe" ? ["colour", "count"] : ["x"]);
    // Streamed: the call's name first, then its arguments in pieces that add up to them.
    const stream = await client.chat.completions.create({ model: "svc", max_tokens: 64, stream: true, reasoning_effort: "none", tools, tool_choice: { type: "function", function: { name: "crop" } }, messages: [{ role: "user", content: [image] }] } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
    let name = "";
    let streamed = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        streamed += tc.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe("crop");
    expect(Number.isInteger((JSON.parse(streamed) as { x: number }).x)).toBe(true);
    expect(finish).toBe("tool_calls");
    // Auto: the image is still an image (a coding agent that pastes a screenshot keeps its tools and the
    // model sees it), also where the caller forbids the OCR fallback.
    const auto = await client.chat.completions.create({ model: "svc", max_tokens: 8, messages: [{ role: "user", content: [image] }], tools, glassbox: { enabled: true } } as never, { headers: { "X-Image-Input": "vision" } });
    expect((auto as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
    // Auto: where the model itself writes the call's marker, the call's name and arguments follow under their
    // grammars. After a thought this model's two likeliest tokens are an answer word and the call's marker
    // (logits 8 and 6.5): sampled at temperature 2 from those two, about a third of answers start with a call.
    let started: OpenAI.Chat.ChatCompletion | null = null;
    for (let seed = 0; seed < 60 && !started; seed += 2) {
      const res = await chat([image], { max_tokens: 200, reasoning_effort: "low", max_reasoning_tokens: 8, temperature: 2, top_k: 2, seed, tools });
      if (res.choices[0]!.finish_reason === "tool_calls") started = res;
    }
    expect(started).not.toBeNull();
    const [own] = started!.choices[0]!.message.tool_calls! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    expect(["describe", "crop"]).toContain(own!.function.name);
    expect(Object.keys(JSON.parse(own!.function.arguments) as object).sort()).toEqual(own!.function.name === "describe" ? ["colour", "count"] : ["x"]);
    // A budget that ends inside the arguments: finish_reason length, as on the text path (never a 500).
    const short = await chat([image], { max_tokens: 48, reasoning_effort: "none", tools, tool_choice: { type: "function", function: { name: "describe" } } });
    expect(short.choices[0]!.finish_reason).toBe("length");
    expect(short.usage!.completion_tokens).toBeLessThanOrEqual(48);
    // A named tool that is not among the tools is the text path's 400.
    const unknown = await chat([image], { tools, tool_choice: { type: "function", function: { name: "nope" } } }).catch((e: unknown) => e);
    expect((unknown as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  });

  it("thinking with an image: the reasoning budget closes the thought and the answer follows; JSON after a thought", async () => {
    const image: OpenAI.Chat.ChatCompletionContentPart = { type: "image_url", image_url: { url: dataUrl } };
    type Reasoned = OpenAI.Chat.ChatCompletion & { choices: Array<{ message: { reasoning_content?: string } }>; usage: { reasoning_tokens?: number } };
    const capped = (await chat([image], { max_tokens: 48, reasoning_effort: "high", max_reasoning_tokens: 2 })) as Reasoned;
    expect(capped.usage.reasoning_tokens).toBeLessThanOrEqual(3);
    expect(capped.choices[0]!.message.reasoning_content).toBeTruthy();
    expect(capped.choices[0]!.message.content).toMatch(/\w/);
    const json = (await chat([image], {
      max_tokens: 96,
      reasoning_effort: "high",
      response_format: { type: "json_schema", json_schema: { name: "r", strict: true, schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false } } },
    })) as Reasoned;
    expect(json.choices[0]!.message.reasoning_content).toBeTruthy();
    expect(Number.isInteger((JSON.parse(json.choices[0]!.message.content!) as { n: number }).n)).toBe(true);
  });

  it("a remote image URL is refused with a clear 400; nothing is fetched", async () => {
    const err = await chat([{ type: "image_url", image_url: { url: "http://127.0.0.1:9/cat.png" } }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("url_not_fetched");
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe("messages[0].content[0].image_url");
  });

  it("an image part that holds no image is a 400 naming it", async () => {
    const err = await chat([{ type: "image_url", image_url: { url: `data:image/png;base64,${Buffer.from("not an image").toString("base64")}` } }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe("messages[0].content[0].image_url");
  });

  it("logprobs with an image the model reads: a clear 400 (Chat and Responses), never an empty list; without the image they are served", async () => {
    const image: OpenAI.Chat.ChatCompletionContentPart = { type: "image_url", image_url: { url: dataUrl } };
    const err = await chat([{ type: "text", text: question }, image], { logprobs: true, top_logprobs: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("logprobs_unavailable");
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe("logprobs");
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/vision engine reports none/);
    const responsesErr = await client.responses
      .create({ model: "svc", max_output_tokens: 8, include: ["message.output_text.logprobs"], input: [{ role: "user", content: [{ type: "input_text", text: question }, { type: "input_image", image_url: dataUrl, detail: "auto" }] }] })
      .catch((e: unknown) => e);
    expect(responsesErr).toBeInstanceOf(OpenAI.BadRequestError);
    expect((responsesErr as InstanceType<typeof OpenAI.APIError>).code).toBe("logprobs_unavailable");
    expect((responsesErr as InstanceType<typeof OpenAI.APIError>).param).toBe("include");
    // The same model serves them for text, and the image without them.
    const text = await chat([{ type: "text", text: question }], { logprobs: true, top_logprobs: 2 });
    expect(text.choices[0]!.logprobs!.content!.length).toBeGreaterThan(0);
    const plain = await chat([{ type: "text", text: question }, image]);
    expect(plain.choices[0]!.logprobs).toBeNull();
  });
});

describe("tokens and limits", () => {
  it("count_tokens estimates an image by its size (width × height / 750 after scaling): 1049 for 1024×768", async () => {
    const anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const count = async (extra: Anthropic.ContentBlockParam[]) =>
      (await anthropic.messages.countTokens({ model: "claude-haiku-4-5", messages: [{ role: "user", content: [{ type: "text", text: question }, ...extra] }] })).input_tokens;
    const plain = await count([]);
    expect((await count([{ type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } }])) - plain).toBe(1049);
    // A huge image is estimated as scaled: 4000×3000 fits 1.15 megapixels as 1238×929 → 1534.
    const huge = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: "#336699" } }).jpeg().toBuffer();
    expect((await count([{ type: "image", source: { type: "base64", media_type: "image/jpeg", data: huge.toString("base64") } }])) - plain).toBe(1534);
  });

  it("the context fit check counts the image: text that fits alone does not fit with it (a clear 400, nothing generated)", async () => {
    // One "x" is one token here: a text that leaves 32 tokens of the 2048 (less the 16 kept for markers).
    const overhead = (await chat([{ type: "text", text: "x" }], { max_tokens: 1, reasoning_effort: "none" })).usage!.prompt_tokens - 1;
    const text = "x".repeat(2048 - 16 - 32 - overhead);
    const alone = await chat([{ type: "text", text }], { max_tokens: 1, reasoning_effort: "none" });
    expect(alone.usage!.prompt_tokens).toBe(2048 - 16 - 32);
    const err = await chat([{ type: "text", text }, { type: "image_url", image_url: { url: dataUrl } }], { max_tokens: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("context_length_exceeded");
  });

  it("a huge image is scaled before encoding; over 20 MB is a 413; a decompression bomb is a 400", async () => {
    const huge = await sharp({ create: { width: 6000, height: 4000, channels: 3, background: "#884422" } }).jpeg().toBuffer();
    const res = await chat([{ type: "image_url", image_url: { url: `data:image/jpeg;base64,${huge.toString("base64")}` } }]);
    expect(res.usage!.prompt_tokens).toBeGreaterThan(TINY_VISION_IMAGE_TOKENS);
    const big = Buffer.concat([png.subarray(0, 64), Buffer.alloc(21 * 1024 * 1024)]);
    const tooBig = await chat([{ type: "image_url", image_url: { url: `data:image/png;base64,${big.toString("base64")}` } }]).catch((e: unknown) => e);
    expect((tooBig as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((tooBig as InstanceType<typeof OpenAI.APIError>).code).toBe("file_too_large");
    const bomb = await bombPng(20_000, 20_000);
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const refused = await chat([{ type: "image_url", image_url: { url: `data:image/png;base64,${bomb.toString("base64")}` } }]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe("image_too_large");
  });
});

/** A valid 1-bit greyscale PNG of width × height zeros: a few hundred kB that decode to width × height pixels. */
async function bombPng(width: number, height: number): Promise<Buffer> {
  const { deflateSync, crc32 } = await import("node:zlib");
  const chunk = (type: string, data: Buffer) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, "ascii");
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type, "ascii"), data])) >>> 0, 0);
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([1, 0, 0, 0, 0], 8); // bit depth 1, greyscale
  const row = Math.ceil(width / 8) + 1; // filter byte + packed bits
  const idat = deflateSync(Buffer.alloc(row * height), { level: 9 });
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", ihdr), chunk("IDAT", idat), chunk("IEND", Buffer.alloc(0))]);
}

describe("scanned PDFs and video keyframes", () => {
  it("a scanned PDF's pages go to the vision encoder, each as an image after its label; uploaded or inline", async () => {
    const pdf = await scannedPdf([await textPng(["Heron count: 17"]), await blankPng()]);
    const asked = (file: OpenAI.Chat.ChatCompletionContentPart) =>
      client.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: [{ type: "text", text: question }, file] }], glassbox: { enabled: true } } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    const inline = await asked({ type: "file", file: { filename: "scan.pdf", file_data: `data:application/pdf;base64,${pdf.toString("base64")}` } });
    expect((inline as unknown as Traced).svc_trace?.images).toEqual({ count: 2, read_by: "vision", tokens: 2 * TINY_VISION_IMAGE_TOKENS });
    expect(inline.usage!.prompt_tokens).toBeGreaterThan(2 * TINY_VISION_IMAGE_TOKENS);
    const uploaded = await client.files.create({ file: await toFile(pdf, "scan.pdf"), purpose: "user_data" });
    const byId = await asked({ type: "file", file: { file_id: uploaded.id } });
    expect((byId as unknown as Traced).svc_trace?.images).toEqual({ count: 2, read_by: "vision", tokens: 2 * TINY_VISION_IMAGE_TOKENS });
  });

  it("an image sent as a file part (by id, as the window does, or as file_data) is an image for the model", async () => {
    const file = await client.files.create({ file: await toFile(png, "red.png"), purpose: "user_data" });
    for (const part of [
      { type: "file", file: { file_id: file.id } },
      { type: "file", file: { filename: "red.png", file_data: dataUrl } },
    ] as OpenAI.Chat.ChatCompletionContentPart[]) {
      const res = await client.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: [part] }], glassbox: { enabled: true } } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
      expect((res as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
    }
  });

  it("an iWork file's preview image goes to the vision encoder", async () => {
    const preview = await sharp({ create: { width: 400, height: 300, channels: 3, background: "#3366cc" } }).jpeg().toBuffer();
    const uploaded = await client.files.create({ file: await toFile(iworkZip({ name: "preview.jpg", data: preview }), "slides.key"), purpose: "user_data" });
    const res = await client.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: [{ type: "file", file: { file_id: uploaded.id } }] }], glassbox: { enabled: true } } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect((res as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
  });

  it("a video's keyframes go to the vision encoder beside its facts", async () => {
    const video = captionMp4(2, "Keyframe");
    const res = await client.chat.completions.create({
      model: "svc",
      max_tokens: 2,
      messages: [{ role: "user", content: [{ type: "file", file: { filename: "clip.mp4", file_data: `data:video/mp4;base64,${video.toString("base64")}` } }] }],
      glassbox: { enabled: true },
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect((res as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "vision", tokens: TINY_VISION_IMAGE_TOKENS });
  });
});

describe("Responses, Messages and Files", () => {
  it("Responses input_image (data URL and file_id) reaches the encoder", async () => {
    const tokens = async (content: OpenAI.Responses.ResponseInputContent[]) =>
      (await client.responses.create({ model: "svc", max_output_tokens: 16, input: [{ role: "user", content: [{ type: "input_text", text: question }, ...content] }] })).usage!
        .input_tokens;
    const plain = await tokens([]);
    expect((await tokens([{ type: "input_image", detail: "auto", image_url: dataUrl }])) - plain).toBeGreaterThanOrEqual(TINY_VISION_IMAGE_TOKENS);
    const file = await client.files.create({ file: await toFile(png, "red.png"), purpose: "vision" });
    expect((await tokens([{ type: "input_image", detail: "auto", file_id: file.id }])) - plain).toBeGreaterThanOrEqual(TINY_VISION_IMAGE_TOKENS);
  });

  it("Responses and Messages: a forced call with an image is a function_call item / a tool_use block", async () => {
    const schema = { type: "object" as const, properties: { x: { type: "integer" as const } }, required: ["x"], additionalProperties: false };
    const response = await client.responses.create({
      model: "svc",
      max_output_tokens: 64,
      reasoning: { effort: "none" } as never,
      input: [{ role: "user", content: [{ type: "input_image", detail: "auto", image_url: dataUrl }] }],
      tools: [{ type: "function", name: "crop", parameters: schema, strict: true }],
      tool_choice: { type: "function", name: "crop" },
    });
    const item = response.output.find((o) => o.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(item.name).toBe("crop");
    expect(Number.isInteger((JSON.parse(item.arguments) as { x: number }).x)).toBe(true);
    const anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const message = await anthropic.messages.create({
      model: "claude-haiku-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } }] }],
      tools: [{ name: "crop", input_schema: schema }],
      tool_choice: { type: "tool", name: "crop" },
    });
    expect(message.stop_reason).toBe("tool_use");
    const block = message.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    expect(block.name).toBe("crop");
    expect(Number.isInteger((block.input as { x: number }).x)).toBe(true);
  });

  it("Messages image blocks (base64) reach the encoder", async () => {
    const anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const ask = (extra: Anthropic.ContentBlockParam[]) =>
      anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 4, messages: [{ role: "user", content: [{ type: "text", text: question }, ...extra] }] });
    // input_tokens counts what the cache did not serve: the prompt is all three together.
    const prompt = ({ usage }: Anthropic.Message) => usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
    const plain = prompt(await ask([]));
    const image = await ask([{ type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } }]);
    expect(prompt(image) - plain).toBeGreaterThanOrEqual(TINY_VISION_IMAGE_TOKENS);
  });
});

describe("a text-only model", () => {
  let textOnly: SvcServer;
  let textClient: OpenAI;

  beforeAll(async () => {
    const dataDir = tempDataDir();
    textOnly = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "2048"] });
    textClient = new OpenAI({ apiKey: createKey(dataDir), baseURL: `${textOnly.url}/v1`, maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    expect(await textOnly.stop()).toBe(0);
  });

  it("/v1/models says how the loaded model gets images: vision with a projector, ocr without", async () => {
    expect(await client.models.retrieve("svc-preview")).toMatchObject({ id: "svc-preview", svc_image_input: "vision" });
    expect(await textClient.models.retrieve("svc-preview")).toMatchObject({ id: "svc-preview", svc_image_input: "ocr" });
    const [listed] = (await client.models.list()).data;
    expect(listed).toMatchObject({ multimodal: true, svc_image_input: "vision" });
    // /health says where the vision process runs: here, as the text engine, on the CPU.
    const health = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { model: { vision: unknown } }).model.vision;
    expect(await health(server.url)).toEqual({ projector: "tiny-vision.mmproj.gguf", devices: ["CPU"], gpu_layers: 0, note: null });
    expect(await health(textOnly.url)).toBeNull();
  });

  it("reads images with OCR and says so in svc_trace and the file object; the vision model's file object says vision", async () => {
    const res = await textClient.chat.completions.create({
      model: "svc",
      max_tokens: 4,
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl } }] }],
      glassbox: { enabled: true },
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect((res as unknown as Traced).svc_trace?.images).toEqual({ count: 1, read_by: "ocr", tokens: null });
    const file = await textClient.files.create({ file: await toFile(png, "red.png"), purpose: "vision" });
    expect(file).toMatchObject({ content_kind: "image", svc_image_input: "ocr" });
    const seen = await client.files.create({ file: await toFile(png, "red.png"), purpose: "vision" });
    expect(seen).toMatchObject({ content_kind: "image", svc_image_input: "vision" });
    const text = await client.files.create({ file: await toFile(Buffer.from("hello"), "a.txt"), purpose: "user_data" });
    expect(text).not.toHaveProperty("svc_image_input");
  });

  it("X-Image-Input: vision forbids the fallback: a clear 400 on every surface; the vision model takes it", async () => {
    const headers = { "X-Image-Input": "vision" };
    const err = await textClient.chat.completions
      .create({ model: "svc", max_tokens: 4, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl } }] }] }, { headers })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("vision_unavailable");
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/cannot see images/);
    const anthropic = new Anthropic({ apiKey: (textClient as unknown as { apiKey: string }).apiKey, baseURL: textOnly.url, maxRetries: 0 });
    const blocked = await anthropic.messages
      .create(
        { model: "claude-haiku-4-5", max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } }] }] },
        { headers },
      )
      .catch((e: unknown) => e);
    expect(blocked).toBeInstanceOf(Anthropic.BadRequestError);
    // Text alone is fine with the header, and the vision model takes the image.
    expect((await textClient.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }, { headers })).usage!.prompt_tokens).toBeGreaterThan(0);
    const seen = await client.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl } }] }] }, { headers });
    expect(seen.usage!.prompt_tokens).toBeGreaterThan(TINY_VISION_IMAGE_TOKENS);
    const bad = await textClient.chat.completions.create({ model: "svc", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }, { headers: { "X-Image-Input": "pixels" } }).catch((e: unknown) => e);
    expect((bad as InstanceType<typeof OpenAI.APIError>).param).toBe("X-Image-Input");
  });
});

describe("models list", () => {
  it("lists a model with its projector as one that sees images, and never the projector as a model", () => {
    const dir = tempDataDir();
    mkdirSync(join(dir, "models"));
    writeTinyVisionModel(join(dir, "models"), readFileSync(inject("tinyModelPath")));
    const listed = JSON.parse(runSvc(["models", "list", "--data-dir", dir, "--json"]).stdout) as { models: Array<{ file: string; projector: string | null }> };
    expect(listed.models.map((m) => m.file)).toEqual(["tiny-vision.gguf"]);
    expect(listed.models[0]!.projector).toBe(join(dir, "models", "tiny-vision.mmproj.gguf"));
    expect(runSvc(["models", "list", "--data-dir", dir]).stdout).toMatch(/tiny-vision\.gguf.*sees images/);
    // Removing the model removes its projector.
    const removed = runSvc(["models", "remove", "tiny-vision.gguf", "--data-dir", dir, "--force"]);
    expect(removed.status).toBe(0);
    expect(existsSync(join(dir, "models", "tiny-vision.mmproj.gguf"))).toBe(false);
  });
});

describe("models pull", () => {
  it("fetches the projector the hf: manifest names, or --mmproj's; refuses a projector that is not one", async () => {
    const hub = await startModelServer();
    try {
      const tiny = readFileSync(inject("tinyModelPath"));
      hub.files.set("/test/vlm-GGUF/resolve/main/vlm-Q8_0.gguf", tiny);
      hub.files.set("/test/vlm-GGUF/resolve/main/mmproj-F16.gguf", buildTinyVisionProjector());
      hub.manifests.set("test/vlm-GGUF:Q8_0", "vlm-Q8_0.gguf");
      hub.projectors.set("test/vlm-GGUF:Q8_0", "mmproj-F16.gguf");
      const dir = tempDataDir();
      const env = { HF_ENDPOINT: `${hub.url}/` };
      const pulled = await runSvcAsync(["models", "pull", "hf:test/vlm-GGUF:Q8_0", "--data-dir", dir], env);
      expect(pulled.status, pulled.stderr).toBe(0);
      expect(pulled.stdout).toContain("It sees images: its vision projector is hf_test_vlm.Q8_0.mmproj.gguf.");
      const listed = JSON.parse(runSvc(["models", "list", "--data-dir", dir, "--json"]).stdout) as { models: Array<{ file: string; projector: string | null }> };
      expect(listed.models).toEqual([expect.objectContaining({ file: "hf_test_vlm.Q8_0.gguf", projector: join(dir, "models", "hf_test_vlm.Q8_0.mmproj.gguf") })]);

      // --mmproj with a local file, for a model from a URL; --no-mmproj takes none.
      hub.files.set("/m/plain.gguf", tiny);
      const projectorFile = join(dir, "mine.gguf");
      (await import("node:fs")).writeFileSync(projectorFile, buildTinyVisionProjector({ seed: 3 }));
      const local = await runSvcAsync(["models", "pull", `${hub.url}/m/plain.gguf`, "--mmproj", projectorFile, "--data-dir", dir]);
      expect(local.status, local.stderr + local.stdout).toBe(0);
      expect(existsSync(join(dir, "models", "plain.mmproj.gguf"))).toBe(true);
      const notOne = await runSvcAsync(["models", "pull", `${hub.url}/m/plain.gguf`, "--mmproj", inject("tinyModelPath"), "--data-dir", tempDataDir()]);
      expect(notOne.status).toBe(1);
      expect(notOne.stderr).toMatch(/is not a vision projector/);
      const none = await runSvcAsync(["models", "pull", "hf:test/vlm-GGUF:Q8_0", "--no-mmproj", "--data-dir", tempDataDir()], env);
      expect(none.status).toBe(0);
      expect(none.stdout).not.toContain("sees images");
    } finally {
      await hub.close();
    }
  });
});
