// The window's one door to the main process: window.svc.call(method, args) over one IPC channel, nothing
// else (no ipcRenderer, no Node). A sandboxed preload is CommonJS and may require only "electron", so the
// channel name is written out here; test/unit/main-preload.test.ts keeps it equal to CONSOLE_CHANNEL.
import electron = require("electron");
import type { ConsoleBridge, ConsoleResult } from "../server/features/console/contract.js" with { "resolution-mode": "import" };

const CHANNEL = "svc:console";

const bridge: ConsoleBridge = {
  call(method: string, args: unknown[]): Promise<ConsoleResult> {
    return electron.ipcRenderer.invoke(CHANNEL, String(method), Array.isArray(args) ? args : []) as Promise<ConsoleResult>;
  },
};

electron.contextBridge.exposeInMainWorld("svc", bridge);
