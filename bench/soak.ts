// Soak test (issues 17 and 38): a real `svc serve` on the generated model serves well-behaved clients for a
// while (the quiet run), then the same clients with hostile requests interleaved: huge prompts of one
// character, bodies that never end or are not JSON, schemas nested too deep, streams read slowly, never
// read or cut by the client, bursts past the limits, a client holding 1,100 idle connections, deep item
// lists (150k input items, a million content parts in 30 MB, a million agent items), and a calculator bomb
// through an agent run's tool call (the model is the tiny one with a token that scripts the bomb as the
// forced call's argument; see TinyModelOptions.scriptedString). Prints the server's RSS over time, the
// p50/p95 latency of the well-behaved requests in each phase (and their ratio), /health's latency (p95 per
// sample window too), and the count of each outcome per kind of request. Exit code 1 on any 5xx, any hang,
// a well-behaved request or /health probe that failed, a /health p95 of 100 ms or more in a phase, or the
// hostile run's RSS growing by more than a quarter from its first quarter to its last.
//
// Usage: npm run bench:soak [-- --minutes 10] [--quiet 0.25] [--clients 2] [--sample 10] [--model PATH]
//   (--model: another model; the calculator bomb then depends on what it writes)
//   --minutes  the whole run (default 10); --quiet  the share of it without hostile traffic (default 0.25)
//   --clients  well-behaved clients, each sending one request after another (default 2)
//   --sample   seconds between RSS lines (default 10)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import type { Socket } from "node:net";
import { createKey, startSvc } from "../test/support/svc-process.js";
import { rssMiB as rssOf } from "./common.js";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    quiet: { type: "string", default: "0.25" },
    clients: { type: "string", default: "2" },
    sample: { type: "string", default: "10" },
    model: { type: "string" },
  },
});
const totalMs = Number(values.minutes) * 60_000;
const quietMs = totalMs * Number(values.quiet);
const sampleMs = Number(values.sample) * 1000;
/** The bomb: kron nested five times, each squaring (the fourth would hold 4.3 billion elements). */
const CALCULATOR_BOMB = "a=[1,2;3,4];a=kron(a,a);a=kron(a,a);a=kron(a,a);a=kron(a,a);a=kron(a,a)";
// Deadlines shorter than production (30 s / 60 s / 30 s) so that hostile connections end within a short run.
const DEADLINES = { headers: 5, request: 10, streamWrite: 5 };
/** A request not finished after this is a hang. */
const HANG_MS = 120_000;

const dataDir = mkdtempSync(join(tmpdir(), "svc-soak-"));
const modelPath = values.model ?? writeTinyModel(join(dataDir, "scripted.gguf"), { scriptedString: CALCULATOR_BOMB });
const goodKey = createKey(dataDir, "--account", "good");
const hostileKey = createKey(dataDir, "--account", "hostile");

const server = await startSvc({
  model: modelPath,
  dataDir,
  args: [
    "--sequences", "2", "--context-size", "4096", "--headers-timeout", String(DEADLINES.headers),
    "--request-timeout", String(DEADLINES.request), "--stream-write-timeout", String(DEADLINES.streamWrite),
  ],
});
const url = server.url;
const port = Number(new URL(url).port);

const rssMiB = () => rssOf(server.process.pid!);

type Phase = "quiet" | "hostile";
let phase: Phase = "quiet";
const began = performance.now();
const elapsedS = () => (performance.now() - began) / 1000;
let stopping = false;

const outcomes = new Map<string, number>();
function count(kind: string, outcome: string): void {
  const key = `${kind.padEnd(22)} ${outcome}`;
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
}
const latencies: Record<Phase, number[]> = { quiet: [], hostile: [] };
const health: Record<Phase, number[]> = { quiet: [], hostile: [] };
const rss: Array<{ t: number; phase: Phase; mib: number }> = [];
let fiveHundreds = 0;
let hangs = 0;
let wellBehavedFailures = 0;
let healthFailures = 0;
/** The /health p95 of each sample window, per phase. */
const windowP95: Record<Phase, number[]> = { quiet: [], hostile: [] };

/** fetch with the hang deadline; classifies the status. */
async function call(kind: string, path: string, init: RequestInit & { key?: string; anthropic?: boolean }): Promise<Response | null> {
  const headers: Record<string, string> = { "content-type": "application/json", ...(init.headers as Record<string, string>) };
  if (init.key) headers[init.anthropic ? "x-api-key" : "authorization"] = init.anthropic ? init.key : `Bearer ${init.key}`;
  try {
    const res = await fetch(`${url}${path}`, { ...init, headers, signal: init.signal ?? AbortSignal.timeout(HANG_MS) });
    if (res.status >= 500) fiveHundreds++;
    return res;
  } catch (err) {
    if ((err as Error).name === "TimeoutError") {
      hangs++;
      count(kind, "HANG");
    } else count(kind, `client error: ${(err as Error).message}`);
    return null;
  }
}

async function readAll(kind: string, res: Response): Promise<string | null> {
  try {
    return await res.text();
  } catch (err) {
    if ((err as Error).name === "TimeoutError") {
      hangs++;
      count(kind, "HANG (body)");
    } else count(kind, "cut while reading");
    return null;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A well-behaved client: short chat answers and short Messages streams, one after another. */
async function wellBehaved(i: number): Promise<void> {
  for (let n = 0; !stopping; n++) {
    const streamed = n % 2 === 1;
    const started = performance.now();
    const at: Phase = phase;
    const res = streamed
      ? await call("well-behaved stream", "/v1/messages", {
          method: "POST",
          key: goodKey,
          anthropic: true,
          body: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 24, stream: true, messages: [{ role: "user", content: `Client ${i}, turn ${n}: hello` }] }),
        })
      : await call("well-behaved", "/v1/chat/completions", {
          method: "POST",
          key: goodKey,
          body: JSON.stringify({ messages: [{ role: "user", content: `Client ${i}, turn ${n}: hello` }], max_tokens: 24, reasoning_effort: "none" }),
        });
    const kind = streamed ? "well-behaved stream" : "well-behaved";
    if (!res) {
      wellBehavedFailures++;
      continue;
    }
    const text = await readAll(kind, res);
    const ok = res.status === 200 && text !== null && (streamed ? text.includes("event: message_stop") : text.includes('"choices"'));
    count(kind, ok ? "200 complete" : `${res.status} ${text?.slice(0, 80) ?? ""}`);
    if (ok) latencies[at].push(performance.now() - started);
    else if (res.status !== 429) wellBehavedFailures++;
    await sleep(50);
  }
}

/**
 * /health every 250 ms from a process of its own, so that what is measured is the server, not this
 * process's own work (building and sending 30 MB bodies, 1,100 sockets). It prints one line per probe:
 * the latency in ms, or "failed" with the status or error (a hang counts as failed after HANG_MS).
 */
const HEALTH_PROBE = `
const url = process.argv[1];
(async () => {
  for (;;) {
    const started = performance.now();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(${HANG_MS}) });
      await res.text();
      console.log(res.status === 200 ? (performance.now() - started).toFixed(1) : "failed " + res.status);
    } catch (err) {
      console.log("failed " + err.message);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
})();`;

async function healthProbe(): Promise<void> {
  const child = spawn(process.execPath, ["-e", HEALTH_PROBE, `${url}/health`], { stdio: ["ignore", "pipe", "inherit"] });
  let pending = "";
  child.stdout.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split("\n");
    pending = lines.pop()!;
    for (const line of lines) {
      if (line.startsWith("failed")) {
        healthFailures++;
        count("/health", line);
      } else health[phase].push(Number(line));
    }
  });
  while (!stopping) await sleep(250);
  child.kill();
}

/** Raw HTTP for what fetch will not send: bodies that never end, headers that never end. */
function raw(kind: string, head: string, keepSending?: () => string): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    const started = performance.now();
    let response = "";
    const drip = keepSending ? setInterval(() => socket.writable && socket.write(keepSending()), 1000) : null;
    const hang = setTimeout(() => {
      hangs++;
      count(kind, "HANG");
      socket.destroy();
    }, HANG_MS);
    socket.on("data", (d: Buffer) => (response += d.toString()));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      if (drip) clearInterval(drip);
      clearTimeout(hang);
      const status = /^HTTP\/1\.1 (\d+)/.exec(response)?.[1] ?? "closed without a response";
      if (status.startsWith("5")) fiveHundreds++;
      count(kind, `${status} after ${Math.round((performance.now() - started) / 1000)} s`);
      resolve();
    });
    socket.write(head);
  });
}

const head = (path: string, extra: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${hostileKey}\r\nContent-Type: application/json\r\n${extra}\r\n`;

/** A stream whose client reads `bytesPerRead` every `everyMs` (0 bytes: never reads), then closes after `closeAfterMs`. */
function streamReader(kind: string, bytesPerRead: number, everyMs: number, closeAfterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ messages: [{ role: "user", content: "Tell me everything." }], stream: true, reasoning_effort: "none" });
    const socket = connect({ host: "127.0.0.1", port });
    socket.pause();
    let got = 0;
    let closedByServer = true;
    const reader =
      bytesPerRead > 0
        ? setInterval(() => {
            const chunk = socket.read(Math.min(bytesPerRead, socket.readableLength || bytesPerRead)) as Buffer | null;
            if (chunk) got += chunk.length;
          }, everyMs)
        : null;
    const giveUp = setTimeout(() => {
      closedByServer = false;
      socket.destroy();
    }, closeAfterMs);
    socket.on("error", () => undefined);
    socket.on("close", () => {
      if (reader) clearInterval(reader);
      clearTimeout(giveUp);
      count(kind, closedByServer ? "closed by the server" : got > 0 ? "client closed (read some)" : "client closed (read nothing)");
      resolve();
    });
    socket.write(head("/v1/chat/completions", `Content-Length: ${Buffer.byteLength(body)}\r\n`) + body);
  });
}

function deepSchema(depth: number): string {
  return '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"string"}' + "}}".repeat(depth);
}

/** `count` empty items as a JSON array's text (JSON.stringify of a million objects is slow itself). */
const items = (item: string, count: number) => `[${Array(count).fill(item).join(",")}]`;
// As bytes, encoded once: fetch would encode a string body again each time, on this process's thread.
const BODIES = {
  inputItems: new TextEncoder().encode(`{"model":"svc","input":${items("{}", 150_000)}}`),
  contentParts: new TextEncoder().encode(`{"model":"svc","input":[{"role":"user","content":${items('{"type":"input_text","text":""}', 1_000_000)}}]}`),
  agentItems: new TextEncoder().encode(`{"input":${items("{}", 1_000_000)}}`),
  tenMegabytes: new TextEncoder().encode(JSON.stringify({ model: "svc", max_tokens: 8, messages: [{ role: "user", content: "x".repeat(10 * 2 ** 20) }] })),
};

/** A 400 naming its code; anything else is counted as it is. */
async function deepList(kind: string, path: string, body: Uint8Array<ArrayBuffer>): Promise<void> {
  const res = await call(kind, path, { method: "POST", key: hostileKey, body });
  if (!res) return;
  const text = (await readAll(kind, res)) ?? "{}";
  count(kind, `${res.status} ${(JSON.parse(text) as { error?: { code?: string } }).error?.code ?? ""}`);
}

/**
 * A client holding 1,100 connections that send nothing for `holdMs`, opening another 0.25 s after each the
 * server closes (at once, its 76 beyond the server's 1,024 would churn as a flood of thousands a second).
 */
async function connectionHog(holdMs: number): Promise<void> {
  const kind = "1,100 idle connections";
  const until = performance.now() + holdMs;
  const open = new Set<Socket>();
  let closedByServer = 0;
  let opened = 0;
  const openOne = () => {
    if (performance.now() >= until || stopping) return;
    const socket = connect({ host: "127.0.0.1", port });
    opened++;
    open.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => {
      if (!open.delete(socket)) return;
      closedByServer++;
      setTimeout(openOne, 250);
    });
  };
  for (let i = 0; i < 1100; i++) openOne();
  while (performance.now() < until && !stopping) await sleep(250);
  for (const socket of [...open]) {
    open.delete(socket);
    socket.destroy();
  }
  hog.opened += opened;
  hog.closedByServer += closedByServer;
  count(kind, `held ${Math.round(holdMs / 1000)} s`);
}
const hog = { opened: 0, closedByServer: 0 };

/** One hostile request of each kind in turn, forever, with a pause between. */
const hostileKinds: Array<[string, () => Promise<void>]> = [
  [
    "1 MB prompt",
    async () => {
      const res = await call("1 MB prompt", "/v1/chat/completions", { method: "POST", key: hostileKey, body: JSON.stringify({ messages: [{ role: "user", content: "x".repeat(2 ** 20) }] }) });
      if (res) count("1 MB prompt", `${res.status} ${JSON.parse((await readAll("1 MB prompt", res)) ?? "{}").error?.code ?? ""}`);
    },
  ],
  [
    "10 MB prompt",
    async () => {
      const res = await call("10 MB prompt", "/v1/messages", { method: "POST", key: hostileKey, anthropic: true, body: BODIES.tenMegabytes });
      if (res) count("10 MB prompt", `${res.status}`);
    },
  ],
  [
    "60k-token prompt",
    async () => {
      const res = await call("60k-token prompt", "/v1/chat/completions", { method: "POST", key: hostileKey, body: JSON.stringify({ messages: [{ role: "user", content: "x".repeat(60_000) }] }) });
      if (res) count("60k-token prompt", `${res.status} ${JSON.parse((await readAll("60k-token prompt", res)) ?? "{}").error?.code ?? ""}`);
    },
  ],
  [
    "invalid JSON",
    async () => {
      const res = await call("invalid JSON", "/v1/chat/completions", { method: "POST", key: hostileKey, body: '{"messages": [' });
      if (res) count("invalid JSON", `${res.status} ${JSON.parse((await readAll("invalid JSON", res)) ?? "{}").error?.code ?? ""}`);
    },
  ],
  [
    "schema 20k deep",
    async () => {
      const body = `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${deepSchema(20_000)}}}}`;
      const res = await call("schema 20k deep", "/v1/chat/completions", { method: "POST", key: hostileKey, body });
      if (res) count("schema 20k deep", `${res.status} ${JSON.parse((await readAll("schema 20k deep", res)) ?? "{}").error?.code ?? ""}`);
    },
  ],
  ["body never ends", () => raw("body never ends", head("/v1/chat/completions", "Content-Length: 100000\r\n") + '{"messages":')],
  ["body drips 1 B/s", () => raw("body drips 1 B/s", head("/v1/chat/completions", "Content-Length: 100000\r\n"), () => " ")],
  ["headers never end", () => raw("headers never end", `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`, () => "X-Slow: 1\r\n")],
  ["stream never read", () => streamReader("stream never read", 0, 0, 30_000)],
  ["stream read slowly", () => streamReader("stream read slowly", 512, 500, 30_000)],
  [
    "stream aborted",
    async () => {
      const controller = new AbortController();
      const res = await call("stream aborted", "/v1/chat/completions", {
        method: "POST",
        key: hostileKey,
        body: JSON.stringify({ messages: [{ role: "user", content: "Go on" }], stream: true }),
        signal: controller.signal,
      });
      if (!res) return;
      await res.body?.getReader().read();
      controller.abort();
      count("stream aborted", `${res.status}, aborted after the first chunk`);
    },
  ],
  ["1,100 idle connections", () => connectionHog(15_000)],
  ["150k input items", () => deepList("150k input items", "/v1/responses", BODIES.inputItems)],
  ["1M content parts", () => deepList("1M content parts", "/v1/responses", BODIES.contentParts)],
  ["1M agent items", () => deepList("1M agent items", "/v1/agent/run", BODIES.agentItems)],
  [
    "calculator bomb",
    async () => {
      const kind = "calculator bomb";
      const res = await call(kind, "/v1/agent/run", {
        method: "POST",
        key: hostileKey,
        body: JSON.stringify({ model: "svc-fast", input: "Work it out.", tools: [{ type: "calculator" }], tool_choice: { type: "calculator" }, temperature: 0, max_steps: 2 }),
      });
      if (!res) return;
      const text = await readAll(kind, res);
      if (res.status !== 200 || text === null) return count(kind, `${res.status}`);
      const run = JSON.parse(text) as { status: string; steps: Array<{ type: string; arguments?: string; error?: { code: string } | null }> };
      const step = run.steps.find((s) => s.type === "tool_call");
      const scripted = step?.arguments?.includes(CALCULATOR_BOMB) ? "the bomb" : "another expression";
      count(kind, `200 run ${run.status}, ${scripted}: ${step?.error?.code ?? (step ? "no error" : "no tool call")}`);
    },
  ],
  [
    "burst of 40",
    async () => {
      const statuses = await Promise.all(
        Array.from({ length: 40 }, async () => {
          const res = await call("burst of 40", "/v1/chat/completions", {
            method: "POST",
            key: hostileKey,
            body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 16, reasoning_effort: "none" }),
          });
          if (!res) return "no response";
          await readAll("burst of 40", res);
          return res.status === 429 && !res.headers.get("retry-after") ? "429 without Retry-After" : String(res.status);
        }),
      );
      for (const s of statuses) count("burst of 40", s);
    },
  ],
];

async function hostile(offset: number): Promise<void> {
  const pending = new Set<Promise<void>>();
  for (let i = offset; !stopping; i++) {
    const [, run] = hostileKinds[i % hostileKinds.length]!;
    const p = run().finally(() => pending.delete(p));
    pending.add(p);
    await sleep(1500);
  }
  await Promise.all(pending);
}

console.log(`soak: ${values.minutes} min against ${url} (2 sequences, tiny model, 1 thread); quiet for the first ${(quietMs / 60_000).toFixed(1)} min`);
console.log(`deadlines: headers ${DEADLINES.headers} s, request ${DEADLINES.request} s, stream write ${DEADLINES.streamWrite} s`);
console.log("   time  phase     RSS MiB  well-behaved done  /health p95 ms");
const sampler = setInterval(() => {
  const mib = rssMiB();
  rss.push({ t: elapsedS(), phase, mib });
  const done = latencies.quiet.length + latencies.hostile.length;
  const h = health[phase];
  const windowed = pct(h.slice(-40), 95);
  if (Number.isFinite(windowed)) windowP95[phase].push(windowed);
  console.log(`${elapsedS().toFixed(0).padStart(6)} s  ${phase.padEnd(8)}  ${mib.toFixed(0).padStart(7)}  ${String(done).padStart(17)}  ${windowed.toFixed(0).padStart(14)}`);
}, sampleMs);
rss.push({ t: 0, phase, mib: rssMiB() });

const workers = [...Array.from({ length: Number(values.clients) }, (_, i) => wellBehaved(i)), healthProbe()];
await sleep(quietMs);
phase = "hostile";
const hostileWorkers = [hostile(0), hostile(Math.floor(hostileKinds.length / 2))];
await sleep(totalMs - quietMs);
stopping = true;
await Promise.all([...workers, ...hostileWorkers]);
clearInterval(sampler);
rss.push({ t: elapsedS(), phase, mib: rssMiB() });
await server.stop();
rmSync(dataDir, { recursive: true, force: true });

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

console.log("\noutcomes (kind, outcome: count):");
for (const [key, n] of [...outcomes].sort()) console.log(`  ${key.padEnd(64)} ${n}`);
console.log(
  `1,100 idle connections: ${hog.opened} opened in all, ${hog.closedByServer} of them closed by the server (to make room beyond the 1,024, and at the ${DEADLINES.headers} s headers deadline)`,
);
const q95 = pct(latencies.quiet, 95);
const h95 = pct(latencies.hostile, 95);
console.log(`\nwell-behaved latency, ms: quiet p50 ${pct(latencies.quiet, 50).toFixed(0)} p95 ${q95.toFixed(0)} (n=${latencies.quiet.length});` +
  ` hostile p50 ${pct(latencies.hostile, 50).toFixed(0)} p95 ${h95.toFixed(0)} (n=${latencies.hostile.length}); p95 ratio ${(h95 / q95).toFixed(2)}x`);
console.log(
  `/health latency, ms: quiet p95 ${pct(health.quiet, 95).toFixed(0)} max ${pct(health.quiet, 100).toFixed(0)}; hostile p95 ${pct(health.hostile, 95).toFixed(0)} max ${pct(health.hostile, 100).toFixed(0)};` +
    ` highest p95 of a ${values.sample} s window: quiet ${Math.max(...windowP95.quiet).toFixed(0)}, hostile ${Math.max(...windowP95.hostile).toFixed(0)}; ${healthFailures} failed`,
);
const quietRss = rss.filter((r) => r.phase === "quiet").map((r) => r.mib);
const hostileRss = rss.filter((r) => r.phase === "hostile").map((r) => r.mib);
const lastQuarter = hostileRss.slice(Math.floor(hostileRss.length * 0.75));
const firstQuarterMedian = pct(hostileRss.slice(0, Math.ceil(hostileRss.length / 4)), 50);
const lastQuarterMedian = pct(lastQuarter, 50);
console.log(
  `server RSS, MiB: quiet ${Math.min(...quietRss).toFixed(0)}..${Math.max(...quietRss).toFixed(0)}; hostile ${Math.min(...hostileRss).toFixed(0)}..${Math.max(...hostileRss).toFixed(0)};` +
    ` median of the hostile run's first and last quarter ${firstQuarterMedian.toFixed(0)} -> ${lastQuarterMedian.toFixed(0)}`,
);
const problems = [
  fiveHundreds ? `${fiveHundreds} responses with a 5xx` : "",
  hangs ? `${hangs} hangs` : "",
  wellBehavedFailures ? `${wellBehavedFailures} well-behaved requests failed` : "",
  healthFailures ? `${healthFailures} /health probes failed` : "",
  pct(health.quiet, 95) >= 100 || pct(health.hostile, 95) >= 100 ? "/health p95 of 100 ms or more" : "",
  [...windowP95.quiet, ...windowP95.hostile].some((p) => p >= 100) ? `/health p95 of 100 ms or more in ${[...windowP95.quiet, ...windowP95.hostile].filter((p) => p >= 100).length} sample window(s)` : "",
  lastQuarterMedian > firstQuarterMedian * 1.25 ? `RSS grew from ${firstQuarterMedian.toFixed(0)} to ${lastQuarterMedian.toFixed(0)} MiB over the hostile run` : "",
].filter(Boolean);
console.log(problems.length ? `FAILED: ${problems.join(", ")}.` : "OK: no 5xx, no hang, every well-behaved request and /health probe served, /health p95 under 100 ms in every window, RSS flat.");
if (problems.length) console.log(`server log:\n${server.output().slice(-4000)}`);
process.exitCode = problems.length ? 1 : 0;
