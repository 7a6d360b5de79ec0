// Time to first token for one 1024×768 image: our server (the vision process: llama.cpp's mtmd through
// @fugood/llama.node) against llama.cpp's own llama-server with --mmproj, on the same model and projector
// files, the same threads and context. Each round sends a new image (its colour changes, so no cache serves
// it) and then the same request again (what the KV cache gives back). Medians over the rounds.
//
// Usage: npm run bench:vision [-- --model PATH.gguf --mmproj PATH.gguf] [--rounds N] [--threads N]
//                               [--llama-server PATH] [--peer] [--json OUT.json]
// Without --model: the generated tiny model with the generated tiny projector (resources/test-model).
// The llama-server side runs with --llama-server PATH, or with --peer, which takes (or first builds, about
// 10+ minutes on 2 cores) the llama-server bench:peer uses (.cache/peer). Not part of `npm test`.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import sharp from "sharp";
import { buildTinyModel } from "../resources/test-model/tiny-model.js";
import { buildTinyVisionProjector } from "../resources/test-model/tiny-vision.js";
import { ensureLlamaServer, ROOT } from "./llama-server-build.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    mmproj: { type: "string" },
    rounds: { type: "string", default: "5" },
    threads: { type: "string", default: "2" },
    "llama-server": { type: "string" },
    peer: { type: "boolean" },
    json: { type: "string" },
  },
});
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const work = mkdtempSync(join(tmpdir(), "svc-bench-vision-"));
const children: ChildProcess[] = [];

function cleanup(): void {
  for (const child of children) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
}
process.on("exit", cleanup);
process.on("SIGINT", () => process.exit(130));

/** The model and its projector, side by side as the server looks for them. */
function modelFiles(): { model: string; projector: string } {
  if (values.model) {
    if (!values.mmproj) throw new Error("--model needs --mmproj (the model's projector).");
    const model = join(work, "model.gguf");
    const projector = join(work, "model.mmproj.gguf");
    spawnSync("ln", ["-s", values.model, model]);
    spawnSync("ln", ["-s", values.mmproj, projector]);
    return { model, projector };
  }
  const model = join(work, "tiny-vision.gguf");
  const projector = join(work, "tiny-vision.mmproj.gguf");
  writeFileSync(model, buildTinyModel());
  writeFileSync(projector, buildTinyVisionProjector());
  return { model, projector };
}

function waitForLine(child: ChildProcess, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${out.slice(-3000)}`)), 120_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const match = pattern.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${what} exited with ${code}:\n${out.slice(-3000)}`)));
  });
}

async function startOurs(model: string): Promise<{ url: string; key: string }> {
  const dataDir = join(work, "data");
  const svc = join(ROOT, "bin", "svc.js");
  const created = spawnSync(process.execPath, [svc, "keys", "create", "--data-dir", dataDir], { encoding: "utf8" });
  const key = created.stdout.trim().split("\n").at(-1)!.trim();
  const child = spawn(process.execPath, [svc, "serve", "--port", "0", "--data-dir", dataDir, "--model", model, "--threads", String(threads), "--sequences", "1", "--context-size", "4096"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, SVC_LOG_LEVEL: "info" },
  });
  children.push(child);
  const url = (await waitForLine(child, /http:\/\/127\.0\.0\.1:\d+/, "svc serve"))[0];
  // The vision process loads after the model: wait until the server says images go to the model.
  for (let i = 0; i < 600; i++) {
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ svc_image_input: string | null }> };
    if (models.data[0]?.svc_image_input === "vision") return { url, key };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("The server never said its model sees images (is the projector beside the model?).");
}

async function startPeer(binary: string, model: string, projector: string): Promise<{ url: string; key: string }> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(binary, ["-m", model, "--mmproj", projector, "--port", String(port), "--host", "127.0.0.1", "-t", String(threads), "-c", "4096", "-np", "1", "--no-mmproj-offload"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  await waitForLine(child, /server is listening|HTTP server listening|listening on http/, "llama-server");
  return { url: `http://127.0.0.1:${port}`, key: "none" };
}

async function image(round: number): Promise<string> {
  const png = await sharp({ create: { width: 1024, height: 768, channels: 3, background: { r: (round * 37) % 256, g: (round * 91) % 256, b: 128 } } })
    .png()
    .toBuffer();
  return `data:image/png;base64,${png.toString("base64")}`;
}

/** Milliseconds from sending the request to the first streamed token (content or reasoning). */
async function ttft(server: { url: string; key: string }, dataUrl: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
    body: JSON.stringify({
      model: "svc",
      stream: true,
      max_tokens: 4,
      temperature: 0,
      // Thinking, as llama-server runs this template by default: the first token may be the thought's.
      reasoning_effort: "low",
      messages: [{ role: "user", content: [{ type: "text", text: "What is in this picture?" }, { type: "image_url", image_url: { url: dataUrl } }] }],
    }),
  });
  if (!res.ok || !res.body) throw new Error(`${server.url}: ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  let first: number | null = null;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    if (first === null && /"(content|reasoning_content)":"[^"]/.test(buffer)) first = performance.now() - started;
  }
  if (first === null) throw new Error(`${server.url}: no token came back:\n${buffer.slice(-1000)}`);
  return first;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const { model, projector } = modelFiles();
const sides: Array<{ name: string; server: { url: string; key: string } }> = [{ name: "svc (vision process)", server: await startOurs(model) }];
const peerBinary = values["llama-server"] ?? (values.peer ? ensureLlamaServer((line) => console.error(line)) : undefined);
if (peerBinary) {
  if (!existsSync(peerBinary)) throw new Error(`No llama-server at ${peerBinary}.`);
  sides.push({ name: "llama-server --mmproj", server: await startPeer(peerBinary, model, projector) });
}
const results: Record<string, { cold: number[]; cached: number[] }> = {};
for (const side of sides) {
  await ttft(side.server, await image(999)); // warm-up: first-request costs (graphs, buffers)
  results[side.name] = { cold: [], cached: [] };
}
for (let round = 0; round < rounds; round++) {
  const dataUrl = await image(round);
  // Alternate the sides each round, so drift on this shared machine hits both alike.
  for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
    results[side.name]!.cold.push(await ttft(side.server, dataUrl));
    results[side.name]!.cached.push(await ttft(side.server, dataUrl));
  }
}
console.log(`Time to first token, one 1024×768 PNG, ${threads} thread(s), median of ${rounds} (${values.model ?? "generated tiny model + tiny projector"}):`);
for (const [name, r] of Object.entries(results))
  console.log(`  ${name.padEnd(24)} new image ${median(r.cold).toFixed(1).padStart(8)} ms   same again ${median(r.cached).toFixed(1).padStart(8)} ms`);
if (!peerBinary) console.log("  (llama-server not run: give --llama-server PATH, or --peer to build the one bench:peer uses)");
if (values.json) writeFileSync(values.json, JSON.stringify({ threads, rounds, model: values.model ?? "tiny", results }, null, 2));
process.exit(0);
