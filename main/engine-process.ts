// The desktop app's engine process: Electron's utilityProcess running the server's engine-child.js, as the
// channel server/engine/process-engine.ts talks to. A crash there (a native abort, the OOM killer) ends that
// process only; the window and the server in this main process stay up and start another.
import { createInterface } from "node:readline";
import type { EngineChannel, EngineSpawner, FromEngine, ToEngine } from "../server/engine/engine-protocol.js";

/** The part of Electron's UtilityProcess this uses (typed here so the adapter is testable without Electron). */
export interface UtilityChild {
  postMessage(message: unknown): void;
  on(event: "message", listener: (message: unknown) => void): unknown;
  on(event: "exit", listener: (code: number) => void): unknown;
  kill(): boolean;
  stdout: NodeJS.ReadableStream | null;
  stderr: NodeJS.ReadableStream | null;
}

export interface UtilityForker {
  fork(modulePath: string, args?: string[], options?: { env?: NodeJS.ProcessEnv; stdio?: "pipe"; serviceName?: string }): UtilityChild;
}

/** An EngineSpawner over Electron's utilityProcess (pass `utilityProcess` from "electron"). */
export function utilityEngineSpawner(utility: UtilityForker): EngineSpawner {
  return (entry, env): EngineChannel => {
    const child = utility.fork(entry, [], { env, stdio: "pipe", serviceName: "svc engine" });
    let alive = true;
    const stderr: Array<(line: string) => void> = [];
    const drained: Array<Promise<void>> = [];
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      const lines = createInterface({ input: stream });
      lines.on("line", (line) => {
        for (const listener of stderr) listener(line);
      });
      drained.push(new Promise((resolve) => lines.once("close", () => resolve())));
    }
    child.on("exit", () => {
      alive = false;
    });
    // The exit is reported once what the process wrote last has been read (the line saying why comes last),
    // or after half a second.
    const exited = (listener: (reason: string) => void) => (code: number) =>
      void Promise.race([Promise.all(drained), new Promise((r) => setTimeout(r, 500))]).then(() => listener(`exit code ${code}`));
    return {
      send: (message: ToEngine) => {
        if (alive) child.postMessage(message);
      },
      onMessage: (listener) => void child.on("message", (message) => listener(message as FromEngine)),
      // utilityProcess reports a code only; a crash shows as a code other than 0 (and its stderr says why).
      onExit: (listener) => void child.on("exit", exited(listener)),
      onStderr: (listener) => void stderr.push(listener),
      kill: () => void child.kill(),
    };
  };
}
