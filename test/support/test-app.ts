// A fresh app on a temporary store, driven with app.inject; the engine is whatever the test passes.
import { rmSync } from "node:fs";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { expect } from "vitest";
import { EngineHost } from "../../server/engine/engine-host.js";
import { BatchService, type BatchServiceOptions } from "../../server/features/batches/batch-service.js";
import type { Engine } from "../../server/engine/types.js";
import { AccountsService, type AccountsServiceOptions } from "../../server/features/accounts/accounts-service.js";
import { AuditService, type AuditServiceOptions } from "../../server/features/audit/audit-service.js";
import { FilesService } from "../../server/features/files/files-service.js";
import { KeysService } from "../../server/features/keys/keys-service.js";
import { sharedIngest } from "../../server/ingest/ingest.js";
import { buildApp } from "../../server/app.js";
import type { RequestObserver } from "../../server/core/request-context.js";
import type { ServerDeps } from "../../server/features/server-deps.js";
import { InferencePipeline, schedulerForHost } from "../../server/pipeline/pipeline.js";
import { Store } from "../../server/store/store.js";
import { tempDataDir } from "./svc-process.js";

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  keys: KeysService;
  accounts: AccountsService;
  audit: AuditService;
  files: FilesService;
  key: string;
  batches: BatchService;
  close(): Promise<void>;
}

export interface TestAppOptions {
  accountLimit?: number;
  maxQueue?: number;
  observers?: RequestObserver[];
  sseKeepAliveMs?: number;
  streamWriteTimeoutMs?: number;
  log?: ServerDeps["log"];
  /** Options of the accounts service (session policy, throttle, clock). */
  accounts?: AccountsServiceOptions;
  /** Options of the audit service (retention, clock). */
  audit?: AuditServiceOptions;
  /** Options of the batch service (clock, limits, worker concurrency). */
  batches?: Partial<Omit<BatchServiceOptions, "repo" | "pipeline">>;
}

/** `engine` is wrapped in a host of its own; pass an EngineHost to drive loading and switching yourself. */
export async function buildTestApp(engine: Engine | EngineHost | null, options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = tempDataDir();
  const store = Store.open(dataDir);
  const keys = new KeysService(store);
  const accounts = new AccountsService(store, keys, options.accounts);
  const audit = new AuditService(store, { log: options.log, ...options.audit });
  const host = engine instanceof EngineHost ? engine : EngineHost.of(engine);
  const files = new FilesService({ store, dataDir, ingest: sharedIngest() });
  await files.start();
  const scheduler = schedulerForHost(host, { accountLimit: options.accountLimit, maxQueue: options.maxQueue });
  const pipeline = new InferencePipeline(host, { scheduler, log: options.log, files });
  const batches = new BatchService({ ...options.batches, repo: store.batches, pipeline });
  const app = await buildApp({
    pipeline,
    keys,
    accounts,
    audit,
    batches,
    engineHost: host,
    files,
    version: "test",
    observers: [audit.observer, ...(options.observers ?? [])],
    sseKeepAliveMs: options.sseKeepAliveMs,
    streamWriteTimeoutMs: options.streamWriteTimeoutMs,
    log: options.log,
  });
  const key = keys.create().key;
  batches.start();
  return {
    app,
    store,
    keys,
    accounts,
    audit,
    files,
    key,
    batches,
    async close() {
      await batches.close();
      await app.close();
      audit.close();
      await files.close();
      store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * POSTs `body` to `url` as JSON (a string goes as it is, so a test can send a broken body) with the app's own
 * key where the surface looks for it: x-api-key on the Messages routes, a Bearer token on the others.
 * `headers` add to those, or replace them.
 */
export function postJson(t: TestApp, url: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const auth = url.startsWith("/v1/messages") ? { "x-api-key": t.key } : { authorization: `Bearer ${t.key}` };
  return t.app.inject({
    method: "POST",
    url,
    headers: { ...auth, "content-type": "application/json", ...headers },
    payload: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** An OpenAI-shaped 400 invalid_request_error whose param is `param`, with a message that says something. */
export function expectInvalidParam(res: LightMyRequestResponse, param: string): void {
  expect(res.statusCode).toBe(400);
  const error = res.json().error;
  expect(error.param).toBe(param);
  expect(error.type).toBe("invalid_request_error");
  expect(error.message.length).toBeGreaterThan(10);
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
