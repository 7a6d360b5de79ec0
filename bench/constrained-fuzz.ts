// The full count of issue 36's constrained-generation fuzz (test/support/constrained-fuzz.ts): `npm run
// bench:fuzz [-- COUNT]` (default 1500) starts `svc serve` on the tiny test model and prints each failure and
// the totals. Exit code 1 if any case failed.
import { writeTinyModel } from "../resources/test-model/cli.js";
import { runFuzz } from "../test/support/constrained-fuzz.js";
import { createKey, removeTempDataDirs, startSvc, tempDataDir } from "../test/support/svc-process.js";

const count = Number(process.argv[2] ?? 1500);
const dataDir = tempDataDir();
const key = createKey(dataDir);
const server = await startSvc({ model: writeTinyModel(), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
const started = performance.now();
try {
  const results = await runFuzz(server.url, key, 0, count);
  const failed = results.filter((r) => r.problem !== null);
  for (const r of failed) console.log(`FAIL ${JSON.stringify(r.fuzzCase)}: ${r.problem} ${JSON.stringify(r.text)}`);
  const by = (surface: string) => results.filter((r) => r.fuzzCase.surface === surface).length;
  const multiByte = results.filter((r) => /[^\x00-\x7f]/.test(r.text ?? "")).length;
  console.log(
    `${results.length} constrained generations (chat ${by("chat")}, responses ${by("responses")}, messages ${by("messages")}): ` +
      `${failed.length} failed, ${results.filter((r) => r.status >= 500).length} with a 5xx, ${multiByte} with multi-byte characters, ` +
      `${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  process.exitCode = failed.length === 0 ? 0 : 1;
} finally {
  await server.stop();
  removeTempDataDirs();
}
