// A template that matched no specialised chat wrapper is remembered (server/engine/chat-wrapper-memo.ts), so
// the next load asks for the Jinja wrapper by type instead of scanning again: the wrappers must render the
// same prompts either way, the memo must be keyed by what decides the scan, and a cache folder that cannot be
// written must cost only the scan.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, resolveChatWrapper, type ChatHistoryItem, type ChatWrapper, type ChatModelFunctions, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { chatWrapperMemoDirectory, chatWrapperMemoKey, knownJinjaOnly, rememberJinjaOnly } from "../../server/engine/chat-wrapper-memo.js";
import { resolveChatWrappers } from "../../server/engine/prompt.js";

let model: LlamaModel;
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-memo-"));
  dirs.push(dir);
  return dir;
};

beforeAll(async () => {
  const llama = await getLlama({ gpu: false, build: "never" });
  model = await llama.loadModel({ modelPath: inject("tinyModelPath"), vocabOnly: true });
});
afterAll(async () => {
  await model?.dispose();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const history: ChatHistoryItem[] = [
  { type: "system", text: "You are terse." },
  { type: "user", text: "Hello" },
  { type: "model", response: ["Calling.", { type: "functionCall", name: "lookup", params: { q: "x" }, result: { found: true } }, "Done."] },
  { type: "user", text: "Again" },
  { type: "model", response: [] },
];
const functions: ChatModelFunctions = { lookup: { description: "Looks up", params: { type: "object", properties: { q: { type: "string" } } } } };
const render = (wrapper: ChatWrapper | null) => wrapper!.generateContextState({ chatHistory: history, availableFunctions: functions }).contextText.toString();

describe("the chat wrapper memo", () => {
  it("the test model's template matches no specialised wrapper; asked for by type, the wrappers render the same prompts, in both modes", () => {
    const scanned = resolveChatWrapper(model);
    expect(scanned!.wrapperName).toBe("JinjaTemplate");
    const typed = resolveChatWrapper(model, { type: "jinjaTemplate" });
    expect(render(typed)).toBe(render(scanned));
    expect(typed!.settings).toEqual(scanned!.settings);
    const fastScanned = resolveChatWrapper(model, { customWrapperSettings: { jinjaTemplate: { reasoning: false } } });
    const { thinking, fast } = resolveChatWrappers(model);
    expect(render(thinking)).toBe(render(scanned));
    expect(render(fast)).toBe(render(fastScanned));
    expect((fast as unknown as { reasoning: boolean }).reasoning).toBe(false);
    expect((thinking as unknown as { reasoning: boolean }).reasoning).toBe(true);
  });

  it("a load remembers it, and the next one skips the scan", () => {
    const cache = tempDir();
    const previous = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = cache;
    try {
      const key = chatWrapperMemoKey(model)!;
      expect(knownJinjaOnly(key)).toBe(false);
      const t0 = performance.now();
      resolveChatWrappers(model);
      const first = performance.now() - t0;
      expect(readdirSync(chatWrapperMemoDirectory())).toEqual([key]);
      expect(knownJinjaOnly(key)).toBe(true);
      const t1 = performance.now();
      const again = resolveChatWrappers(model);
      const second = performance.now() - t1;
      expect(render(again.thinking)).toBe(render(resolveChatWrapper(model)));
      // Reported, not asserted as a time: the scan renders the template once per specialised wrapper.
      console.log(`resolveChatWrappers: ${first.toFixed(0)} ms scanning, ${second.toFixed(0)} ms remembered`);
    } finally {
      if (previous === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = previous;
    }
  });

  it("is keyed by the template, the vocabulary and the library's version", () => {
    const key = chatWrapperMemoKey(model)!;
    expect(key).toMatch(/^[0-9a-f]{32}$/);
    expect(chatWrapperMemoKey(model)).toBe(key);
    expect(chatWrapperMemoKey(model, "0.0.0")).not.toBe(key);
    const metadata = model.fileInfo.metadata as unknown as { tokenizer: { chat_template: string; ggml: { tokens: string[] } } };
    const withTemplate = (template: string) => ({ fileInfo: { metadata: { ...metadata, tokenizer: { ...metadata.tokenizer, chat_template: template } } }, tokens: model.tokens }) as unknown as LlamaModel;
    expect(chatWrapperMemoKey(withTemplate(`${metadata.tokenizer.chat_template} `))).not.toBe(key);
    expect(chatWrapperMemoKey(withTemplate("  "))).toBeNull();
    const tokens = [...metadata.tokenizer.ggml.tokens];
    tokens[tokens.length - 1] = "<|other|>";
    const otherVocab = { fileInfo: { metadata: { ...metadata, tokenizer: { ...metadata.tokenizer, ggml: { ...metadata.tokenizer.ggml, tokens } } } }, tokens: model.tokens } as unknown as LlamaModel;
    expect(chatWrapperMemoKey(otherVocab)).not.toBe(key);
  });

  it("a cache folder that cannot be written, or holds something else, costs only the scan", () => {
    const blocked = join(tempDir(), "file");
    writeFileSync(blocked, "not a folder");
    rememberJinjaOnly("abc", join(blocked, "memo"));
    expect(knownJinjaOnly("abc", join(blocked, "memo"))).toBe(false);
    const dir = tempDir();
    writeFileSync(join(dir, "abc"), "llama3\n");
    expect(knownJinjaOnly("abc", dir)).toBe(false);
  });
});
