// An error's `param` names the field of the surface that was called (issue 42): the pipeline and the engine
// name the internal request's fields (the conversation, the output schema, a tool's schema), and each
// surface answers with its own name for them, streamed or not.
import { afterEach, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { FakeEngine } from "../support/fake-engine.js";
import { buildTestApp, postJson, type TestApp } from "../support/test-app.js";

let t: TestApp | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

/** The engine refuses every request with this error, naming the internal field `param`. */
async function refusing(code: string, param: string): Promise<TestApp> {
  t = await buildTestApp(new FakeEngine(() => new AppError("invalid_request", "Refused by the engine.", { code, param })));
  return t;
}

const post = (test: TestApp, url: string, body: object) => postJson(test, url, body);

const chat = { url: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Hi" }] } };
const responses = { url: "/v1/responses", body: { input: "Hi" } };
const messages = { url: "/v1/messages", body: { model: "svc", max_tokens: 16, messages: [{ role: "user", content: "Hi" }] } };

describe("error params name the caller's field", () => {
  it("Chat Completions: messages, response_format.json_schema.schema, tools[i].function.parameters", async () => {
    for (const [internal, wire] of [
      ["messages", "messages"],
      ["output_schema", "response_format.json_schema.schema"],
      ["tools[2].schema", "tools[2].function.parameters"],
    ]) {
      const test = await refusing("prompt_too_complex", internal!);
      const res = await post(test, chat.url, chat.body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: "prompt_too_complex", param: wire });
      await test.close();
      t = null;
    }
  });

  it("Responses: input, text.format.schema, tools[i].parameters", async () => {
    for (const [code, internal, wire] of [
      ["context_length_exceeded", "messages", "input"],
      ["invalid_schema", "output_schema", "text.format.schema"],
      ["invalid_schema", "tools[0].schema", "tools[0].parameters"],
    ]) {
      const test = await refusing(code!, internal!);
      const res = await post(test, responses.url, responses.body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code, param: wire });
      const streamed = await post(test, responses.url, { ...responses.body, stream: true });
      expect(streamed.json().error).toMatchObject({ code, param: wire });
      await test.close();
      t = null;
    }
  });

  it("Messages: messages, output_config.format.schema, tools[i].input_schema", async () => {
    for (const [internal, wire] of [
      ["messages", "messages"],
      ["output_schema", "output_config.format.schema"],
      ["tools[1].schema", "tools[1].input_schema"],
    ]) {
      const test = await refusing("invalid_schema", internal!);
      const res = await post(test, messages.url, messages.body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ details: { error_code: "invalid_schema", param: wire } });
      expect(res.json().error.message).toBe(`${wire}: Refused by the engine.`);
      await test.close();
      t = null;
    }
  });
});
