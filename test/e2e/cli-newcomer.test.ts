// The CLI as a newcomer types it (issue 19): help for each command, `svc models` alone, a second `serve` on a
// taken port (it must fail before loading the model), `models list` during a download, and Ctrl+C during a
// pull pressed as in a terminal (the signal to the whole process group, through npx), whose message must say
// what the next pull really resumes from.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { ROOT, runSvc, runSvcAsync, startSvc, tempDataDir } from "../support/svc-process.js";

const dirs: string[] = [];
function dataDir(): string {
  const dir = tempDataDir();
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("help", () => {
  it("`svc serve --help` explains serve and exits 0, as do -h and `svc serve help`", () => {
    for (const flag of ["--help", "-h", "help"]) {
      const result = runSvc(["serve", flag]);
      expect(result.status, flag).toBe(0);
      expect(result.stdout).toContain("svc serve [--host 127.0.0.1] [--port N|0]");
      expect(result.stdout).toContain("0 picks a free port");
      expect(result.stderr).toBe("");
    }
  });

  it("`svc models` alone shows the models commands; `svc keys` alone the keys commands", () => {
    for (const args of [["models"], ["models", "--help"], ["models", "help"]]) {
      const result = runSvc(args);
      expect(result.status, args.join(" ")).toBe(0);
      expect(result.stdout).toContain("svc models pull [hf:user/repo:quant");
      expect(result.stdout).not.toContain("Unknown");
    }
    const keys = runSvc(["keys"]);
    expect(keys.status).toBe(0);
    expect(keys.stdout).toContain("svc keys create");
  });
});

describe("a second serve", () => {
  let blocker: Server;
  let port: number;
  beforeAll(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    port = (blocker.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

  it("checks the port before anything else and suggests --port 0", () => {
    // A model path that cannot even be opened: the port is checked first, so that is never reached.
    const result = runSvc(["serve", "--port", String(port), "--data-dir", dataDir(), "--model", "/nonexistent/model.gguf"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`svc: Port ${port} on 127.0.0.1 is already in use`);
    expect(result.stderr).toContain("`--port 0` picks a free one");
    expect(result.stderr).not.toContain("/nonexistent/model.gguf");
  });

  it("fails at once beside a running server, without loading the model", async () => {
    const first = await startSvc({ model: inject("tinyModelPath") });
    try {
      const taken = new URL(first.url).port;
      const started = Date.now();
      const second = await runSvcAsync(["serve", "--port", taken, "--data-dir", dataDir(), "--model", inject("tinyModelPath"), "--threads", "1"]);
      expect(second.status).toBe(1);
      expect(second.stderr).toContain(`Port ${taken} on 127.0.0.1 is already in use`);
      expect(second.stderr).not.toMatch(/loaded on|Loading/);
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await first.stop();
    }
  });
});

describe("downloads as a newcomer sees them", () => {
  let hub: ModelServer;
  const big = buildTinyModel({ seed: 12, padBytes: 9_000_000 }); // 12.6 MB: three 5 MiB pieces
  beforeAll(async () => {
    hub = await startModelServer();
    hub.files.set("/m/big.gguf", big);
  });
  afterAll(() => hub.close());

  /** `npx svc models pull URL` in its own process group, as a terminal runs it. */
  function pullLikeATerminal(dir: string) {
    const child = spawn("npx", ["svc", "models", "pull", `${hub.url}/m/big.gguf`, "--data-dir", dir], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
    return {
      output: () => output,
      closed,
      /** Ctrl+C: SIGINT to the whole group (npx and svc both get it, and npx passes it on again). */
      ctrlC: () => {
        try {
          process.kill(-child.pid!, "SIGINT");
        } catch (err) {
          // The group has already exited: there is nothing left to stop.
          if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
        }
      },
    };
  }

  async function until(check: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it("`models list` during a download shows what is kept so far, not the full size, and that it is downloading", async () => {
    const dir = dataDir();
    // Slow enough that the download is still running when `models list` answers, even on a loaded machine.
    hub.bytesPerSecond = 400_000;
    const pull = pullLikeATerminal(dir);
    try {
      await until(() => /Downloading big\.gguf/.test(pull.output()), "the download to start");
      let line = "";
      await until(async () => {
        line = (await runSvcAsync(["models", "list", "--data-dir", dir])).stdout.split("\n").find((l) => l.includes("big.gguf")) ?? "";
        return line !== "";
      }, "big.gguf in the list");
      expect(line).toMatch(/^  big\.gguf  (0 B|[\d.]+ MB) of 12\.6 MB kept so far  \(downloading now\)$/);
      expect(line).not.toContain("12.6 MB of 12.6 MB");
    } finally {
      hub.bytesPerSecond = null;
      pull.ctrlC();
      await pull.closed;
    }
  });

  it("Ctrl+C before the first piece says nothing was kept, and the next pull starts over", async () => {
    const dir = dataDir();
    hub.bytesPerSecond = 800_000; // a 5 MiB piece takes seconds
    const pull = pullLikeATerminal(dir);
    try {
      await until(() => /Downloading big\.gguf/.test(pull.output()), "the download to start");
      pull.ctrlC();
      await pull.closed;
    } finally {
      hub.bytesPerSecond = null;
    }
    expect(pull.output()).toContain("svc: Download stopped before its first piece was complete, so nothing was kept");
    const again = await runSvcAsync(["models", "pull", `${hub.url}/m/big.gguf`, "--data-dir", dir]);
    expect(again.status).toBe(0);
    expect(again.stderr).not.toContain("Resuming");
  });

  it("Ctrl+C later says how much is kept, and the next pull resumes from exactly that", async () => {
    const dir = dataDir();
    hub.bytesPerSecond = 1_000_000;
    const pull = pullLikeATerminal(dir);
    try {
      // Once the list shows a finished piece, there is something to keep.
      await until(async () => / [1-9][\d.]* MB of 12\.6 MB kept/.test((await runSvcAsync(["models", "list", "--data-dir", dir])).stdout), "a finished piece");
      pull.ctrlC();
      await pull.closed;
    } finally {
      hub.bytesPerSecond = null;
    }
    const kept = /svc: Download stopped; ([\d.]+ MB) of 12\.6 MB are kept\. Run the same command again to resume from there\./.exec(pull.output());
    expect(kept, pull.output()).not.toBeNull();
    const again = await runSvcAsync(["models", "pull", `${hub.url}/m/big.gguf`, "--data-dir", dir]);
    expect(again.status).toBe(0);
    expect(again.stderr).toContain(`Resuming: ${kept![1]} of 12.6 MB already downloaded.`);
  });
});
