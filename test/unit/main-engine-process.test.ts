// The desktop app's engine channel over Electron's utilityProcess (main/engine-process.ts), with a stand-in for
// the utility process (no Electron binary here): messages both ways, stderr lines, and the exit reported after
// the last line the process wrote (the one that says why it died).
import { EventEmitter } from "node:events";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { utilityEngineSpawner, type UtilityChild } from "../../main/engine-process.js";

class FakeUtility extends EventEmitter {
  posted: unknown[] = [];
  killed = false;
  stdout = new PassThrough();
  stderr = new PassThrough();
  forkedWith: { entry: string; env: NodeJS.ProcessEnv | undefined } | null = null;
  postMessage(message: unknown): void {
    this.posted.push(message);
  }
  kill(): boolean {
    this.killed = true;
    return true;
  }
}

describe("utilityEngineSpawner", () => {
  it("carries messages both ways, reads stderr by line, and reports the exit after the last line", async () => {
    const child = new FakeUtility();
    const spawn = utilityEngineSpawner({
      fork: (entry, _args, options) => {
        child.forkedWith = { entry, env: options?.env };
        return child as unknown as UtilityChild;
      },
    });
    const channel = spawn("/app/dist/server/engine/engine-child.js", { SVC_ENGINE_PROCESS: "1" });
    expect(child.forkedWith).toEqual({ entry: "/app/dist/server/engine/engine-child.js", env: { SVC_ENGINE_PROCESS: "1" } });
    const received: unknown[] = [];
    const lines: string[] = [];
    const exits: string[] = [];
    channel.onMessage((m) => received.push(m));
    channel.onStderr((l) => lines.push(l));
    channel.onExit((r) => exits.push(r));

    channel.send({ type: "close" });
    expect(child.posted).toEqual([{ type: "close" }]);
    child.emit("message", { type: "closed" });
    expect(received).toEqual([{ type: "closed" }]);

    // The process dies: Electron says so before the last of its stderr has been read.
    child.stderr.write("ggml.c:1234: GGML_ASSERT(n > 0) failed\n");
    child.emit("exit", 134);
    expect(exits).toEqual([]);
    child.stderr.end();
    child.stdout.end();
    await new Promise((r) => setTimeout(r, 20));
    expect(lines).toEqual(["ggml.c:1234: GGML_ASSERT(n > 0) failed"]);
    expect(exits).toEqual(["exit code 134"]);
    // Nothing goes to a process that is gone.
    channel.send({ type: "close" });
    expect(child.posted).toHaveLength(1);
    channel.kill();
    expect(child.killed).toBe(true);
  });
});
