// What the audit costs a request: the same app, with a scripted engine that answers at once, serves N chat
// completions with and without the audit observer (alternating rounds, so machine noise hits both alike).
// Prints requests per second of each and their ratio, and how long a stats query and an erasure take over
// the records written. Usage: npx tsx bench/audit-overhead.ts [--requests 2000] [--rounds 3] [--concurrency 8]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { EngineHost } from "../server/engine/engine-host.js";
import { AccountsService } from "../server/features/accounts/accounts-service.js";
import { AuditService } from "../server/features/audit/audit-service.js";
import { KeysService } from "../server/features/keys/keys-service.js";
import { buildApp } from "../server/app.js";
import { InferencePipeline, schedulerForHost } from "../server/pipeline/pipeline.js";
import { FilesService } from "../server/features/files/files-service.js";
import { sharedIngest } from "../server/ingest/ingest.js";
import { Store } from "../server/store/store.js";
import { answer, FakeEngine } from "../test/support/fake-engine.js";
import { median } from "./common.js";

const { values } = parseArgs({ options: { requests: { type: "string", default: "2000" }, rounds: { type: "string", default: "3" }, concurrency: { type: "string", default: "8" } } });
const N = Number(values.requests);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = Number(values.concurrency);

async function setup(withAudit: boolean) {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-audit-bench-"));
  const store = Store.open(dataDir);
  const keys = new KeysService(store);
  const audit = new AuditService(store);
  const host = EngineHost.of(new FakeEngine(() => answer("ok")));
  const scheduler = schedulerForHost(host, { accountLimit: 1000, maxQueue: 1000 });
  const files = new FilesService({ store, dataDir, ingest: sharedIngest() });
  const app = await buildApp({
    pipeline: new InferencePipeline(host, { scheduler, files }),
    keys,
    accounts: new AccountsService(store, keys),
    audit,
    files,
    engineHost: host,
    version: "bench",
    observers: withAudit ? [audit.observer] : [],
  });
  const key = keys.create().key;
  return {
    app,
    audit,
    store,
    key,
    async close() {
      await app.close();
      audit.close();
      store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function run(withAudit: boolean): Promise<{ rps: number; audit: AuditService; store: Store; key: string; close: () => Promise<void> }> {
  const s = await setup(withAudit);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) {
        next++;
        const res = await s.app.inject({ method: "POST", url: "/v1/chat/completions", headers: { authorization: `Bearer ${s.key}` }, payload: { messages: [{ role: "user", content: "hi" }] } });
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${res.body}`);
      }
    }),
  );
  const rps = N / ((performance.now() - started) / 1000);
  return { rps, ...s };
}

const results = { with: [] as number[], without: [] as number[] };
for (let r = 0; r < ROUNDS; r++) {
  for (const withAudit of r % 2 === 0 ? [false, true] : [true, false]) {
    const out = await run(withAudit);
    results[withAudit ? "with" : "without"].push(out.rps);
    if (withAudit && r === ROUNDS - 1) {
      const accountId = out.store.accounts.findByName("local")!.id;
      let t = performance.now();
      const stats = out.audit.stats({ accountId }, "Europe/Berlin");
      const statsMs = performance.now() - t;
      const id = out.audit.list({ filter: { accountId }, limit: 1 }).data[0]!.id;
      t = performance.now();
      out.audit.erase(accountId, id);
      const eraseMs = performance.now() - t;
      console.log(`records: ${stats.requests}; stats over them: ${statsMs.toFixed(1)} ms; one erasure (delete + WAL truncation): ${eraseMs.toFixed(1)} ms`);
    }
    await out.close();
  }
}
const w = median(results.with);
const wo = median(results.without);
console.log(`${N} chat completions x ${ROUNDS} rounds, concurrency ${CONCURRENCY} (scripted engine, app.inject)`);
console.log(`without audit: ${wo.toFixed(0)} req/s   with audit: ${w.toFixed(0)} req/s   ratio with/without: ${(w / wo).toFixed(3)}`);
