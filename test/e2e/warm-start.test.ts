// Issue 43: warm start (opt-in). A long system prompt is saved the first time; after a restart its first request
// is served from the saved state (reported as cached, much sooner); with warm start off nothing is written; a
// different model file never loads another's state.
import { copyFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, inject, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { createKey, runSvc, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const servers: SvcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

async function start(dataDir: string, model: string, warm: "on" | "off"): Promise<SvcServer> {
  const server = await startSvc({ model, dataDir, args: ["--sequences", "1", "--context-size", "16384", "--warm-start", warm] });
  servers.push(server);
  return server;
}

/** A system prompt of about 6000 tokens (the tiny model's tokenizer makes about one token a character). */
const SYSTEM = Array.from({ length: 1000 }, (_, i) => ["answer", "question", "blue", "stars", "quiet", "rivers"][i % 6]).join(" ");

/** Streams a chat call; returns the time to its first byte of content and the cached prompt tokens. */
async function ask(server: SvcServer, key: string, system: string, user: string): Promise<{ ttftMs: number; cached: number; prompt: number }> {
  const started = performance.now();
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "svc",
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0,
      reasoning_effort: "none",
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
    }),
  });
  expect(res.status, res.status === 200 ? "" : await res.clone().text()).toBe(200);
  const reader = res.body!.getReader();
  let ttftMs = -1;
  let text = "";
  const decoder = new TextDecoder();
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    if (ttftMs < 0) ttftMs = performance.now() - started;
    text += decoder.decode(value, { stream: true });
  }
  const usage = text
    .split("\n\n")
    .map((b) => b.replace(/^data: /, ""))
    .filter((d) => d.startsWith("{"))
    .map((d) => JSON.parse(d) as { usage?: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } })
    .find((e) => e.usage)!.usage!;
  return { ttftMs, cached: usage.prompt_tokens_details.cached_tokens, prompt: usage.prompt_tokens };
}

/**
 * The generated model, copied into the data dir: a saved state belongs to one model file (its size, time and
 * bytes), and other test files write the shared one again while this one runs (the README's `npm run test-model`).
 */
function ownModel(dataDir: string): string {
  const path = join(dataDir, "model.gguf");
  copyFileSync(inject("tinyModelPath"), path);
  return path;
}

function savedStates(dataDir: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (entry.name.endsWith(".state") || entry.name.includes(".state.")) out.push(join(dir, entry.name));
    }
  };
  walk(dataDir);
  return out;
}

describe("warm start", () => {
  it("restores a long system prompt after a restart: reported as cached, its first token much sooner", { timeout: 240_000 }, async () => {
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    const model = ownModel(dataDir);
    let server = await start(dataDir, model, "on");
    // Cold: the prefix is read (and saved); nothing was cached.
    const cold = await ask(server, key, SYSTEM, "Hello");
    expect(cold.cached).toBe(0);
    const states = savedStates(dataDir);
    expect(states).toHaveLength(1);
    expect(statSync(states[0]!).mode & 0o777).toBe(0o600);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { warm_start: { enabled: boolean; prefixes: Array<{ tokens: number }> } };
    expect(health.warm_start.enabled).toBe(true);
    expect(health.warm_start.prefixes).toHaveLength(1);
    const prefixTokens = health.warm_start.prefixes[0]!.tokens;
    expect(prefixTokens).toBeGreaterThan(5000);
    expect(prefixTokens).toBeLessThan(cold.prompt);
    // A cold request with another system prompt of the same length, for the time to compare with.
    const otherCold = await ask(server, key, SYSTEM.replace(/^answer/, "rivers"), "Hello");
    // Only the chat template's opening is shared with what the sequence held.
    expect(otherCold.cached).toBeLessThan(20);

    await server.stop();
    server = await start(dataDir, model, "on");
    // After the restart, another user message after the same system prompt: the prefix comes from disk.
    const warm = await ask(server, key, SYSTEM, "Something else entirely");
    console.log(`warm start: prefix ${prefixTokens} tokens; first token cold ${cold.ttftMs.toFixed(0)} / ${otherCold.ttftMs.toFixed(0)} ms, warm ${warm.ttftMs.toFixed(0)} ms`);
    expect(warm.cached).toBe(prefixTokens);
    expect(warm.ttftMs, `warm ${warm.ttftMs} ms, cold ${cold.ttftMs} and ${otherCold.ttftMs} ms`).toBeLessThan(Math.min(cold.ttftMs, otherCold.ttftMs) / 2);
    // The CLI lists and clears them.
    const listed = runSvc(["engine", "warm-start", "list", "--data-dir", dataDir]);
    expect(listed.status).toBe(0);
    expect(listed.stdout).toContain(`${prefixTokens} tokens`);
    const cleared = runSvc(["engine", "warm-start", "clear", "--data-dir", dataDir]);
    expect(cleared.stdout).toMatch(/Removed 2 saved prefixes/);
    expect(savedStates(dataDir)).toEqual([]);
  });

  it("writes nothing when off (the default)", { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    const server = await start(dataDir, inject("tinyModelPath"), "off");
    const first = await ask(server, key, SYSTEM, "Hello");
    expect(first.cached).toBe(0);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { warm_start: { enabled: boolean } };
    expect(health.warm_start).toEqual({ enabled: false });
    await server.stop();
    expect(savedStates(dataDir)).toEqual([]);
    expect(readdirSync(dataDir)).not.toContain("warm-start");
  });

  it("never loads one model's state into another model", { timeout: 240_000 }, async () => {
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    const first = await start(dataDir, ownModel(dataDir), "on");
    await ask(first, key, SYSTEM, "Hello");
    await first.stop();
    expect(savedStates(dataDir)).toHaveLength(1);
    // Another model file (other heads), the same vocabulary and so the same prefix tokens.
    const otherModel = join(dataDir, "other.gguf");
    writeFileSync(otherModel, buildTinyModel({ headSize: 32 }));
    const second = await start(dataDir, otherModel, "on");
    const answer = await ask(second, key, SYSTEM, "Hello");
    expect(answer.cached).toBe(0);
    // Its own state is saved beside the first model's.
    expect(savedStates(dataDir)).toHaveLength(2);
  });
});
