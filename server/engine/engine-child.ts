// The engine process: runs LlamaEngine (model, context, sequences, tokenizing, grammars, generation) for the
// server, which starts it (process-engine.ts) and talks to it in the messages of engine-protocol.ts. A native
// crash here (a failed GGML_ASSERT, a segfault, the kernel's OOM killer during a load) ends this process
// only; the server reports it, fails the requests that were running and starts a new one.
//
// Started as a forked Node process (under `svc serve`, and in the desktop app with ELECTRON_RUN_AS_NODE, as
// the speech model is) or as Electron's utilityProcess: the channel is the IPC of whichever it is.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { CREDIT, serializeError, type FromEngine, type ToEngine } from "./engine-protocol.js";
import { LlamaEngine } from "./llama-engine.js";
import { currentGpu } from "./llama-runtime.js";
import { EventOutbox } from "./event-outbox.js";

interface ParentPort {
  postMessage(message: unknown): void;
  on(event: "message", listener: (event: { data: unknown }) => void): void;
}

const parentPort = (process as unknown as { parentPort?: ParentPort }).parentPort;

function send(message: FromEngine): void {
  if (parentPort) parentPort.postMessage(message);
  else process.send?.(message);
}

function onMessage(listener: (message: ToEngine) => void): void {
  if (parentPort) parentPort.on("message", (event) => listener(event.data as ToEngine));
  else process.on("message", (message) => listener(message as ToEngine));
}

// The server gone (its channel closed): nothing is left to serve.
process.on("disconnect", () => process.exit(0));

/**
 * Tests make this process fail for real (test/reliability/engine-crash.test.ts): SVC_ENGINE_TEST_CRASH_FILE names
 * a file of directives, one a line, "abort-mid-decode" or "exit-during-load", each optionally followed by how
 * many times and, for the abort, how many ms it waits after the third event (so a test can queue requests
 * behind it); the first line is the one in force, each use counts it down, and its last use removes it (and
 * the file with the last line). Unset (always, outside those tests), nothing is read.
 */
function crashDirective(what: "abort-mid-decode" | "exit-during-load"): { delayMs: number } | null {
  const file = process.env.SVC_ENGINE_TEST_CRASH_FILE;
  if (!file) return null;
  let lines: string[];
  try {
    lines = readFileSync(file, "utf8").split("\n").map((l) => l.trim()).filter((l) => l !== "");
  } catch {
    return null;
  }
  const [directive, count = "1", delay = "0"] = (lines[0] ?? "").split(/\s+/);
  if (directive !== what) return null;
  const left = Number(count) - 1;
  const rest = left > 0 ? [`${directive} ${left} ${delay}`, ...lines.slice(1)] : lines.slice(1);
  if (rest.length > 0) writeFileSync(file, `${rest.join("\n")}\n`);
  else rmSync(file, { force: true });
  return { delayMs: Number(delay) || 0 };
}

function crashNow(how: "abort" | "kill", why: string): never {
  process.stderr.write(`svc engine test crash: ${why}\n`);
  if (how === "abort") process.abort();
  process.kill(process.pid, "SIGKILL");
  throw new Error("unreachable");
}

let engine: LlamaEngine | null = null;

interface Generation {
  abort: AbortController;
  credit: number;
  resume: (() => void) | null;
}
const generations = new Map<number, Generation>();

// Events go to the server together (event-outbox.ts).
const outbox = new EventOutbox((batches) => send({ type: "events", batches }));

async function generate(id: number, request: Extract<ToEngine, { type: "generate" }>["request"]): Promise<void> {
  const generation: Generation = { abort: new AbortController(), credit: CREDIT, resume: null };
  generations.set(id, generation);
  const crash = crashDirective("abort-mid-decode");
  let sent = 0;
  try {
    if (!engine) throw new Error("no model is loaded in the engine process");
    for await (const event of engine.generate(request, generation.abort.signal)) {
      if (crash && sent === 3) {
        // Three events are on their way to the client; the next decode never finishes.
        outbox.flush();
        if (crash.delayMs > 0) await new Promise((r) => setTimeout(r, crash.delayMs));
        setImmediate(() => crashNow("abort", "abort mid-decode"));
      }
      outbox.queue(id, event);
      sent++;
      generation.credit--;
      while (generation.credit <= 0 && !generation.abort.signal.aborted) await new Promise<void>((resolve) => (generation.resume = resolve));
      generation.resume = null;
    }
    outbox.flush();
    send({ type: "end", id });
  } catch (err) {
    outbox.flush();
    send({ type: "failed", id, error: serializeError(err) });
  } finally {
    generations.delete(id);
  }
}

onMessage((message) => {
  switch (message.type) {
    case "load":
      if (crashDirective("exit-during-load") !== null) crashNow("kill", "killed during a model load");
      LlamaEngine.load({ ...message.options, log: (level, text, inWindow) => send({ type: "log", level, message: text, ...(inWindow ? { inWindow } : {}) }) }).then(
        (loaded) => {
          engine = loaded;
          send({ type: "loaded", status: loaded.status() });
        },
        (err: unknown) => send({ type: "load_failed", error: serializeError(err) }),
      );
      return;
    case "generate":
      void generate(message.id, message.request);
      return;
    case "credit": {
      const generation = generations.get(message.id);
      if (!generation) return;
      generation.credit += message.events;
      generation.resume?.();
      return;
    }
    case "abort": {
      const generation = generations.get(message.id);
      if (!generation) return;
      generation.abort.abort();
      generation.resume?.();
      return;
    }
    case "count":
      if (!engine) {
        send({ type: "failed", id: message.id, error: serializeError(new Error("no model is loaded in the engine process")) });
        return;
      }
      engine.countPromptTokens(message.request).then(
        (tokens) => send({ type: "count_result", id: message.id, tokens }),
        (err: unknown) => send({ type: "failed", id: message.id, error: serializeError(err) }),
      );
      return;
    case "gpu":
      currentGpu().then(
        (gpu) => send({ type: "gpu_result", id: message.id, gpu }),
        () => send({ type: "gpu_result", id: message.id, gpu: null }),
      );
      return;
    case "close":
      void (async () => {
        for (const generation of generations.values()) generation.abort.abort();
        await engine?.close().catch(() => undefined);
        engine = null;
        send({ type: "closed" });
        // Leave once the message is out; a native thread still winding down must not keep the process.
        setTimeout(() => process.exit(0), 50).unref();
      })();
      return;
  }
});
