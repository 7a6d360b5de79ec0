// Schema work off the event loop (issue 38, item 6). A request's output and tool schemas are compiled into
// grammars before it waits for the model (so one the server cannot hold is a 400 at once), and an answer is
// validated against its schema after it; compiling a large schema the first time takes up to about a second.
// Both run in a worker thread (schema-worker.ts); what a schema came to is remembered here by its text, so a
// schema seen before (agents send the same tools on every call) costs one lookup. The worker ends after a
// minute idle; one that dies (out of memory on a hostile schema) fails its task alone and a new one starts.
import { Worker } from "node:worker_threads";
import { UnsupportedSchemaError } from "../engine/json-schema-grammar.js";
import type { SchemaReply, SchemaTask } from "./schema-worker.js";

const KNOWN_LIMIT = 256;
const IDLE_MS = 60_000;

type Task = SchemaTask extends infer T ? (T extends SchemaTask ? Omit<T, "id"> : never) : never;

function startWorker(): Worker {
  const here = import.meta.url;
  if (here.endsWith(".ts")) {
    // From TypeScript sources (tests, tsx): the worker registers tsx before loading its module.
    const entry = new URL("./schema-worker.ts", here).href;
    return new Worker(`import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`, { eval: true });
  }
  return new Worker(new URL("./schema-worker.js", here));
}

export class SchemaChecks {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, { resolve: (reply: SchemaReply) => void; reject: (err: Error) => void }>();
  private nextId = 1;
  private idle: NodeJS.Timeout | null = null;
  /** Schemas (by strictness and text) the grammar holds (null), or why it does not. */
  private readonly known = new Map<string, { message: string; path: string } | null>();

  /** Throws UnsupportedSchemaError when the schema cannot be turned into a grammar (as cachedSchemaGrammar). */
  async support(schema: Record<string, unknown>, strict: boolean): Promise<void> {
    let key: string;
    try {
      key = `${strict ? "s" : "b"}:${JSON.stringify(schema)}`;
    } catch (err) {
      if (err instanceof RangeError) throw new UnsupportedSchemaError("the schema is nested too deeply", "");
      throw err;
    }
    let verdict = this.known.get(key);
    if (verdict === undefined) {
      const reply = await this.run({ kind: "support", schema, strict });
      if (!reply.ok && "failed" in reply) throw new Error(reply.failed);
      verdict = reply.ok ? null : reply.unsupported;
      if (this.known.size >= KNOWN_LIMIT) this.known.delete(this.known.keys().next().value!);
    } else this.known.delete(key);
    this.known.set(key, verdict);
    if (verdict !== null) throw new UnsupportedSchemaError(verdict.message, verdict.path);
  }

  /** What fails when `value` is checked against `schema` (empty: nothing). */
  async validate(schema: Record<string, unknown>, value: unknown, strict: boolean): Promise<string[]> {
    const reply = await this.run({ kind: "validate", schema, value, strict });
    if (!reply.ok) throw new Error("failed" in reply ? reply.failed : reply.unsupported.message);
    return reply.errors ?? [];
  }

  async close(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }

  private run(task: Task): Promise<SchemaReply> {
    if (this.idle) clearTimeout(this.idle);
    const worker = this.ensureWorker();
    const id = this.nextId++;
    return new Promise<SchemaReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ ...task, id } as SchemaTask);
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.unref();
    worker.on("message", (reply: SchemaReply) => {
      const waiting = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      waiting?.resolve(reply);
      if (this.pending.size === 0) {
        this.idle = setTimeout(() => void this.close(), IDLE_MS);
        this.idle.unref();
      }
    });
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(new Error(`The schema worker stopped: ${err.message}`));
      this.pending.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`exit code ${code}`)));
    this.worker = worker;
    return worker;
  }
}

/** The server's one set of schema checks (the pipeline's, and batch creation's). */
export const sharedSchemaChecks = new SchemaChecks();
