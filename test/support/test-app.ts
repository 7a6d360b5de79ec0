// A fresh app on a temporary store, driven with app.inject; the engine is whatever the test passes.
import { rmSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { EngineHost } from "../../server/engine/engine-host.js";
import type { Engine } from "../../server/engine/types.js";
import { FilesService } from "../../server/features/files/files-service.js";
import { KeysService } from "../../server/features/keys/keys-service.js";
import { sharedIngest } from "../../server/ingest/ingest.js";
import { buildApp } from "../../server/http/app.js";
import { InferencePipeline } from "../../server/pipeline/pipeline.js";
import { Store } from "../../server/store/store.js";
import { tempDataDir } from "./svc-process.js";

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  keys: KeysService;
  files: FilesService;
  key: string;
  close(): Promise<void>;
}

/** `engine` is wrapped in a host of its own; pass an EngineHost to drive loading and switching yourself. */
export async function buildTestApp(engine: Engine | EngineHost | null): Promise<TestApp> {
  const dataDir = tempDataDir();
  const store = Store.open(dataDir);
  const keys = new KeysService(store);
  const host = engine instanceof EngineHost ? engine : EngineHost.of(engine);
  const files = new FilesService({ store, dataDir, ingest: sharedIngest() });
  await files.start();
  const app = await buildApp({ pipeline: new InferencePipeline(host, { files }), keys, engineHost: host, files, version: "test" });
  const key = keys.create().key;
  return {
    app,
    store,
    keys,
    files,
    key,
    async close() {
      await app.close();
      await files.close();
      store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Splits an SSE body into the JSON of its data frames (and the raw "[DONE]"). */
export function sseData(body: string): unknown[] {
  return body
    .split("\n\n")
    .filter((block) => block.trim() !== "" && !block.startsWith(":"))
    .map((block) => {
      const data = block
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      return data === "[DONE]" ? "[DONE]" : JSON.parse(data);
    });
}
