// Counts this process's threads around decodes at 2 threads, with the build the server would load
// (`svc engine build`'s when there is one, else the prebuilt binaries), and prints them as JSON:
// { build, before, afterFirst, afterSecond }. node test/support/decode-threads.mjs MODEL.gguf
// Run by test/engine-build/engine-build.test.ts (dist/ must be built).
import { readdirSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { loadEngineBuild } from "../../dist/server/engine/engine-build.js";

const threads = () => readdirSync("/proc/self/task").length;
const options = { logLevel: LlamaLogLevel.error };
const built = await loadEngineBuild(options);
const llama = built ?? (await getLlama({ ...options, gpu: false, build: "never" }));
const model = await llama.loadModel({ modelPath: process.argv[2], gpuLayers: 0 });
const context = await model.createContext({ contextSize: 256, threads: 2 });
const sequence = context.getSequence();
const tokens = model.tokenize("Count the threads, please.");
const before = threads();
await sequence.evaluateWithoutGeneratingNewTokens(tokens);
const afterFirst = threads();
await sequence.evaluateWithoutGeneratingNewTokens(tokens);
const afterSecond = threads();
console.log(JSON.stringify({ build: built ? "local" : "prebuilt", before, afterFirst, afterSecond }));
await context.dispose();
await model.dispose();
await llama.dispose();
