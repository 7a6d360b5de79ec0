// The preload (main/preload.cts), run as Electron runs a sandboxed preload: CommonJS, with a require that knows
// only "electron". It must expose exactly window.svc.call, over the console's one channel.
import { readFileSync } from "node:fs";
import { runInNewContext } from "node:vm";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { CONSOLE_CHANNEL } from "../../server/features/console/contract.js";

const source = readFileSync(new URL("../../main/preload.cts", import.meta.url), "utf8");

function loadPreload() {
  const { outputText } = ts.transpileModule(source, {
    fileName: "preload.cts",
    compilerOptions: { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
  });
  const exposed: Record<string, unknown> = {};
  const invocations: unknown[][] = [];
  const required: string[] = [];
  const electron = {
    contextBridge: { exposeInMainWorld: (key: string, api: unknown) => (exposed[key] = api) },
    ipcRenderer: { invoke: async (...args: unknown[]) => (invocations.push(args), { ok: true, value: "answer" }) },
  };
  const fakeRequire = (name: string) => {
    required.push(name);
    if (name !== "electron") throw new Error(`A sandboxed preload cannot require '${name}'.`);
    return electron;
  };
  const module = { exports: {} };
  runInNewContext(`(function (require, module, exports) {\n${outputText}\n})`, {})(fakeRequire, module, module.exports);
  return { exposed, invocations, required, outputText };
}

describe("the preload", () => {
  it("compiles to CommonJS that requires only electron", () => {
    const { required, outputText } = loadPreload();
    expect(required).toEqual(["electron"]);
    expect(outputText).not.toMatch(/\bimport\s*\(|^\s*import\s/m);
    expect([...outputText.matchAll(/require\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1])).toEqual(["electron"]);
  });

  it("exposes exactly window.svc = { call }, and no ipcRenderer", () => {
    const { exposed } = loadPreload();
    expect(Object.keys(exposed)).toEqual(["svc"]);
    expect(Object.keys(exposed.svc as object)).toEqual(["call"]);
  });

  it("calls invoke on the console channel with the method and its arguments", async () => {
    const { exposed, invocations } = loadPreload();
    const svc = exposed.svc as { call(method: unknown, args: unknown): Promise<unknown> };
    expect(await svc.call("serverInfo", [])).toEqual({ ok: true, value: "answer" });
    await svc.call("revokeKey", ["key_1"]);
    await svc.call("logs", "not an array");
    expect(invocations).toEqual([
      [CONSOLE_CHANNEL, "serverInfo", []],
      [CONSOLE_CHANNEL, "revokeKey", ["key_1"]],
      [CONSOLE_CHANNEL, "logs", []],
    ]);
  });
});
