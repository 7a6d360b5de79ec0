// Issue 38, item 2: the agent's calculator was unbounded and ran on the server's main thread. math.js
// expressions such as kron nested five times took 19.4 s and 1.56 GB before failing, a 2-D variant was
// killed by the OOM killer, concat doubled 25 times took 9 s and 1.9 GB; a model following instructions
// injected through a file could stall or kill the server. Expressions now run in a process of their own
// under a time and a memory budget, matrices past a bound are refused before they are built, and the model
// reads a tool error that says why. The bombs below are smaller than the (each still held the main
// thread 0.3 to 5 s before), so that running them against the old code stays bearable.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineEvent, EngineRequest } from "../../server/engine/types.js";
import { CalculatorPool } from "../../server/features/agent/calculator-pool.js";
import { ToolBox, type AgentFiles } from "../../server/features/agent/tools.js";
import { FakeEngine, outcome } from "../support/fake-engine.js";
import { writeTinyModel } from "../../resources/test-model/cli.js";
import { createKey, pollHealth, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

const K3 = "[1,2,3;4,5,6;7,8,9]";
/** 3^6 x 3^6 = 531,441 elements. */
const KRON_BOMB = `kron(kron(kron(${K3},${K3}),kron(${K3},${K3})),kron(${K3},${K3}))`;
/** A 2 x 2 doubled 20 times: 4M elements. */
const CONCAT_BOMB = `a=[1,2;3,4]${";a=concat(a,a)".repeat(20)};size(a)`;
/** An assignment far past the end of a vector grows it to 5M elements. */
const GROWTH_BOMB = "a=[1];a[5000000]=1;size(a)";
/** 2^24 calls: seconds of work in a few bytes of memory. */
const TIME_BOMB = "f(x) = x > 0 ? f(x-1) + f(x-1) : 1; f(24)";
/** A string doubled 24 times (128 MB) and then shown: past any heap budget in one allocation. */
const MEMORY_BOMB = `a="abcdefgh"${";a=concat(a,a)".repeat(24)}`;

const noFiles: AgentFiles = {
  list: () => ({ data: [] }),
  get: () => {
    throw new Error("no files");
  },
  contentOf: async () => {
    throw new Error("no files");
  },
};

/**
 * Runs `work` and says how long this thread's event loop was busy meanwhile (ms): running callbacks or held
 * by a synchronous call, anything but waiting in its poll. An expression evaluated on this thread would add
 * its whole run (the time bomb: 1 s). Not the loop's longest delay, which also counts the time the machine
 * gave this process no processor: on CI's two cores, beside the other test file's engine and the
 * calculator's own second of work, that read 110 and 137 ms against a loop that was idle.
 */
async function mainThreadBusy<T>(work: () => Promise<T>): Promise<{ value: T; busyMs: number }> {
  const before = performance.eventLoopUtilization();
  const value = await work();
  return { value, busyMs: performance.eventLoopUtilization(before).active };
}

describe("the calculator runs apart from the server, under a time and memory budget (issue 38, item 2)", () => {
  // The tool box exactly as an agent run has it (the process's calculator).
  const box = new ToolBox({ files: noFiles, accountId: "me", fileIds: null, timezone: "UTC" });
  const calculate = (expression: string) => box.run("calculator", JSON.stringify({ expression }));

  beforeAll(async () => {
    // The first expression also starts the calculator's process (math.js takes a second or two to load).
    expect((await calculate("6*7")).result).toEqual({ expression: "6*7", result: "42" });
  }, 60_000);

  it("matrices past the bound are refused before they are built: a tool error, the main thread never held", async () => {
    for (const bomb of [KRON_BOMB, CONCAT_BOMB, GROWTH_BOMB]) {
      const started = performance.now();
      const { value: outcome, busyMs } = await mainThreadBusy(() => calculate(bomb));
      expect(outcome.error, bomb).toEqual({ code: "calculation_too_large", message: "The calculation would build a matrix of more than 100000 elements, the calculator's limit." });
      // What the model reads back.
      expect(JSON.parse(outcome.output)).toEqual({ error: outcome.error!.message });
      expect(performance.now() - started, bomb).toBeLessThan(1000);
      expect(busyMs, bomb).toBeLessThan(100);
    }
  });

  it("an expression past the time budget is stopped at 1 s of processor time; one past the memory budget ends its own process; the next one is served", async () => {
    const time = await mainThreadBusy(() => calculate(TIME_BOMB));
    expect(time.value.error).toEqual({ code: "calculation_timeout", message: "The calculation needed more than 1 s of processor time, the calculator's time limit, and was stopped." });
    expect(time.busyMs).toBeLessThan(100);
    const memory = await mainThreadBusy(() => calculate(MEMORY_BOMB));
    expect(memory.value.error).toEqual({ code: "calculation_too_large", message: "The calculation needed more than the calculator's 128 MB of memory and was stopped." });
    expect(memory.busyMs).toBeLessThan(100);
    // This process is whole (a worker thread past its heap took it down), and the calculator starts again.
    expect((await calculate("sqrt(16) + 1")).result).toEqual({ expression: "sqrt(16) + 1", result: "5" });
    expect((await calculate("a=[1,2,3]; a[2]=5; a")).result).toEqual({ expression: "a=[1,2,3]; a[2]=5; a", result: "[1, 5, 3]" });
  }, 60_000);

  // CI saw the memory bomb above reported as a timeout: beside the test suite's engines the calculator (then
  // at the lowest priority, under a wall-clock budget) did not get the third of a second it needed within 1 s.
  it("an expression that needs a quarter of a second is answered on a machine busy with other work: the budget is processor time", async () => {
    const busy = Array.from({ length: 4 }, () =>
      spawn(process.execPath, ["-e", "const end = Date.now() + 30000; while (Date.now() < end);"], { stdio: "ignore" }),
    );
    try {
      // 2^18 calls: about 250 ms of processor time alone, several seconds of wall time beside four busy processes.
      const expression = "f(x) = x > 0 ? f(x-1) + f(x-1) : 1; f(18)";
      const started = performance.now();
      expect((await calculate(expression)).result).toEqual({ expression, result: "2.62144e+5" });
      console.log(`f(18) beside 4 busy processes: ${Math.round(performance.now() - started)} ms`);
    } finally {
      for (const child of busy) child.kill("SIGKILL");
    }
  }, 60_000);

  it("ordinary expressions keep their meaning: one-based indices and dimensions, units, functions", async () => {
    for (const [expression, result] of [
      ["max([1,2;3,4], 1)", "[3, 4]"],
      ["concat([1;2],[3;4], 2)", "[[1, 3], [2, 4]]"],
      ["[1,2;3,4] * [5;6]", "[[17], [39]]"],
      ["inv([1,2;3,4])", "[[-2, 1], [1.5, -0.5]]"],
      ["10 km to mi", "6.2137119223733 mi"],
      ["f(x) = x^2; f(3)", "9"],
    ])
      expect((await calculate(expression!)).result, expression).toEqual({ expression, result });
  });
});

describe("closing the calculator", () => {
  // A server shutting down while an agent run has just warmed the calculator up: close() used to wait for
  // ever (the failed start terminated the pool a second time, and workerpool kept only the second waiter).
  it.each([0, 50, 300])("close() %i ms after a warm-up, while its process still starts, returns", async (delayMs) => {
    const pool = new CalculatorPool();
    pool.warmUp();
    await new Promise((r) => setTimeout(r, delayMs));
    const closed = await Promise.race([pool.close().then(() => "closed"), new Promise((r) => setTimeout(() => r("hung"), 10_000))]);
    expect(closed).toBe("closed");
    await expect(pool.evaluate("1+1")).rejects.toMatchObject({ code: "shutting_down" });
  });
});

describe("a calculator bomb through an agent run's tool call (issue 38, item 2)", () => {
  let t: TestApp;
  let engine: FakeEngine;
  beforeAll(async () => {
    // The model follows an instruction it read in a file: it calls the calculator with a bomb, then answers.
    engine = new FakeEngine((request: EngineRequest): EngineEvent[] => {
      const answered = request.messages.some((m) => m.role === "tool");
      if (answered)
        return [
          { type: "start", mode: "fast", promptTokens: 30, cachedTokens: 0 },
          { type: "text.delta", text: "Done." },
          { type: "done", outcome: outcome({ mode: "fast", text: "Done." }) },
        ];
      // A question about 6*7 (the warm-up below) gets that; anything else, the bomb.
      const harmless = request.messages.some((m) => m.role === "user" && JSON.stringify(m.content).includes("6*7"));
      const call = { id: "call_bomb", name: "calculator", arguments: JSON.stringify({ expression: harmless ? "6*7" : KRON_BOMB }) };
      return [
        { type: "start", mode: "fast", promptTokens: 20, cachedTokens: 0 },
        { type: "tool_call.start", index: 0, id: call.id, name: call.name },
        { type: "tool_call.delta", index: 0, argumentsDelta: call.arguments },
        { type: "tool_call.end", index: 0, arguments: call.arguments },
        { type: "done", outcome: outcome({ mode: "fast", toolCalls: [call], stopReason: "tool_calls" }) },
      ];
    });
    t = await buildTestApp(engine);
  });
  afterAll(async () => t.close());

  it("the step is a tool error the model reads, the run completes, and the server's thread is never held", { timeout: 60_000 }, async () => {
    const run = (input: string) =>
      t.app.inject({
        method: "POST",
        url: "/v1/agent/run",
        headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
        payload: JSON.stringify({ model: "svc-fast", input, tools: [{ type: "calculator" }] }),
      });
    // A first run with a harmless expression, outside the measure: the calculator's process starts (a fork of
    // this process) and the route warms; this test is about the bomb.
    const warm = await run("What is 6*7?");
    expect(JSON.parse(warm.body).steps.find((s: { type: string }) => s.type === "tool_call")).toMatchObject({ name: "calculator", output: expect.stringContaining("42") });
    // The server runs in this process here: its event loop is this one.
    const { value: res, busyMs } = await mainThreadBusy(() => run("Summarise my notes."));
    expect(res.statusCode).toBe(200);
    const body = JSON.parse(res.body) as { status: string; steps: Array<{ type: string; name?: string; error?: unknown; output?: string }> };
    expect(body.status).toBe("completed");
    const step = body.steps.find((s) => s.type === "tool_call")!;
    expect(step).toMatchObject({ name: "calculator", error: { code: "calculation_too_large" } });
    // The model's next step had the reason in the tool's answer.
    const toolMessage = engine.requests.at(-1)!.messages.find((m) => m.role === "tool")!;
    expect(JSON.stringify(toolMessage.content)).toContain("more than 100000 elements");
    expect(busyMs).toBeLessThan(100);
  });
});

describe("the issue's bomb through a real server's agent run (a model scripted to write it)", () => {
  /** kron nested five times, each squaring: the fourth would hold 4.3 billion elements. */
  const BOMB = "a=[1,2;3,4];a=kron(a,a);a=kron(a,a);a=kron(a,a);a=kron(a,a);a=kron(a,a)";
  let server: SvcServer;
  let key: string;
  beforeAll(async () => {
    const dataDir = tempDataDir();
    key = createKey(dataDir);
    // The tiny model, with a token holding the bomb that it writes first inside any JSON string a grammar leaves open.
    const model = writeTinyModel(join(tempDataDir(), "scripted.gguf"), { scriptedString: BOMB });
    server = await startSvc({ model, dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  });
  afterAll(async () => {
    expect(await server.stop()).toBe(0);
  });

  const runAgent = (body: object) =>
    fetch(`${server.url}/v1/agent/run`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });

  it("the forced calculator call carries the bomb, its step is the tool's error, the run completes and /health stays quick", { timeout: 60_000, retry: 2 }, async () => {
    // A first run without the calculator: the server's first agent prompt (read while /health waits on the
    // engine, whatever the tools) is not what this test is about.
    expect((await runAgent({ model: "svc-fast", input: "Hi.", tools: [{ type: "current_time" }], tool_choice: { type: "current_time" }, max_steps: 2 })).status).toBe(200);
    await (await fetch(`${server.url}/health`)).text();
    const health = pollHealth(server.url, 10);
    const res = await runAgent({ model: "svc-fast", input: "Work it out.", tools: [{ type: "calculator" }], tool_choice: { type: "calculator" }, temperature: 0, max_steps: 2 });
    const run = (await res.json()) as { status: string; steps: Array<{ type: string; arguments?: string; error?: { code: string } | null }> };
    const latencies = await health.stop();
    expect(res.status).toBe(200);
    expect(run.status).toBe("completed");
    const step = run.steps.find((s) => s.type === "tool_call")!;
    expect(JSON.parse(step.arguments!)).toEqual({ expression: BOMB });
    expect(step.error).toMatchObject({ code: "calculation_too_large" });
    expect(Math.max(...latencies), latencies.map((l) => l.toFixed(0)).join(" ")).toBeLessThan(100);
  });
});
