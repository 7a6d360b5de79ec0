// Loads a model with the engine (dist/ must be built) and prints, as JSON, whether two empty object
// literals that gain the same new key share V8's hidden class (map) before and after the load:
// { before, after }. Needs --allow-natives-syntax (%HaveSameMap).
// node --allow-natives-syntax test/support/object-maps.mjs MODEL.gguf
// Run by test/e2e/object-maps.test.ts: server/core/gc.ts says why it matters.
import { LlamaEngine } from "../../dist/server/engine/llama-engine.js";

const haveSameMap = new Function("a", "b", "return %HaveSameMap(a, b)");
let n = 0;
/** Two objects built the way Node builds a request's headers: empty, then a key no object had before. */
function shared() {
  const key = `never-seen-before-${n++}`;
  const a = {};
  a[key] = 1;
  const b = {};
  b[key] = 1;
  return haveSameMap(a, b);
}

const before = shared();
const engine = await LlamaEngine.load({ modelPath: process.argv[2], threads: 1, sequences: 1, contextSize: 512, mmap: "on" });
const after = shared();
await engine.close();
console.log(JSON.stringify({ before, after }));
