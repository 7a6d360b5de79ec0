// Where the desktop app's server listens (main/server-plan.ts), the tray's wording (main/tray-status.ts) and the
// development native binding (main/dev-native.ts).
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { chooseNativeBinding, devNativeBindingPath } from "../../main/dev-native.js";
import { hostForStart, isAddressInUse, isPortTaken, planPort, portForStart, portNoteFor, windowProfileDir } from "../../main/server-plan.js";
import { trayText } from "../../main/tray-status.js";

describe("hostForStart", () => {
  it("listens on every interface only when LAN exposure is on", () => {
    expect(hostForStart("on")).toBe("0.0.0.0");
    expect(hostForStart("off")).toBe("127.0.0.1");
    expect(hostForStart(undefined)).toBe("127.0.0.1");
    expect(hostForStart("yes")).toBe("127.0.0.1");
  });

  it("lets an explicit SVC_HOST win, as the CLI does", () => {
    expect(hostForStart("off", "192.168.1.5")).toBe("192.168.1.5");
    expect(hostForStart("on", " ::1 ")).toBe("::1");
    expect(hostForStart("on", "")).toBe("0.0.0.0");
  });
});

describe("portForStart and windowProfileDir", () => {
  it("takes the window's port setting unless SVC_PORT is set", () => {
    expect(portForStart(9090, undefined, 8787)).toBe(9090);
    expect(portForStart(null, undefined, 8787)).toBe(8787);
    expect(portForStart(9090, "7000", 7000)).toBe(7000);
    expect(portForStart(9090, " ", 8787)).toBe(9090);
  });

  it("keeps the window's profile (its saved chats) beside the data dir, never inside it", () => {
    expect(windowProfileDir("/home/a/.config/svc-desktop")).toBe("/home/a/.config/svc-desktop-window");
    expect(windowProfileDir("/data/svc/")).toBe("/data/svc-window");
    expect(windowProfileDir("/data/svc").startsWith("/data/svc/")).toBe(false);
  });
});

describe("planPort", () => {
  let blocker: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((resolve) => (blocker ? blocker.close(() => resolve()) : resolve()));
    blocker = null;
  });

  it("keeps a free configured port", async () => {
    expect(await planPort("127.0.0.1", 8787, async () => false)).toEqual({ port: 8787, taken: null });
  });

  it("falls back to a free port when the configured one is taken, and remembers which", async () => {
    expect(await planPort("127.0.0.1", 8787, async () => true)).toEqual({ port: 0, taken: 8787 });
  });

  it("does not probe port 0", async () => {
    expect(await planPort("127.0.0.1", 0, async () => Promise.reject(new Error("probed")))).toEqual({ port: 0, taken: null });
  });

  it("probes a real port", async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen({ host: "127.0.0.1", port: 0 }, resolve));
    const port = (blocker.address() as { port: number }).port;
    expect(await isPortTaken("127.0.0.1", port)).toBe(true);
    expect(await planPort("127.0.0.1", port)).toEqual({ port: 0, taken: port });
    await new Promise<void>((resolve) => blocker!.close(() => resolve()));
    blocker = null;
    expect(await isPortTaken("127.0.0.1", port)).toBe(false);
  });
});

describe("portNoteFor", () => {
  it("says nothing when the server got its port", () => {
    expect(portNoteFor({ port: 8787, taken: null }, 8787)).toBeNull();
    expect(portNoteFor({ port: 0, taken: null }, 41234)).toBeNull();
  });

  it("names the taken port and the one in use", () => {
    const note = portNoteFor({ port: 0, taken: 8787 }, 41234);
    expect(note).toContain("Port 8787 is in use");
    expect(note).toContain("port 41234");
    // A window user is pointed at the setting that fixes it, not at an environment variable.
    expect(note).toContain("Server › Network › Port");
    expect(note).not.toContain("SVC_PORT");
  });
});

describe("isAddressInUse", () => {
  it("finds EADDRINUSE on the error or its cause", () => {
    const listen = Object.assign(new Error("listen EADDRINUSE: address already in use 127.0.0.1:8787"), { code: "EADDRINUSE" });
    expect(isAddressInUse(listen)).toBe(true);
    // As startServer throws it: a StartupError with the listen error as its cause.
    expect(isAddressInUse(new Error("Cannot listen on 127.0.0.1:8787: listen EADDRINUSE", { cause: listen }))).toBe(true);
    expect(isAddressInUse(new Error("Cannot listen on 127.0.0.1:8787: something", { cause: listen }))).toBe(true);
  });

  it("leaves other startup failures alone", () => {
    expect(isAddressInUse(new Error("/m.gguf is not a GGUF model file."))).toBe(false);
    expect(isAddressInUse("EADDRINUSE")).toBe(false);
    expect(isAddressInUse(undefined)).toBe(false);
  });
});

describe("trayText", () => {
  it("says the server is starting before it runs", () => {
    expect(trayText({ model: null, baseUrl: null, portNote: null, lanExposed: false }).lines).toEqual(["Starting the server…"]);
  });

  it("shows the model, the base URL and the port note", () => {
    const text = trayText({
      model: { state: "ready", name: "Tiny", error: null },
      baseUrl: "http://127.0.0.1:41234",
      portNote: "Port 8787 is in use, so the server is on port 41234 for now.",
      lanExposed: true,
    });
    expect(text.lines).toEqual([
      "Model: Tiny",
      "Base URL: http://127.0.0.1:41234 (also on the LAN)",
      "Port 8787 is in use, so the server is on port 41234 for now.",
    ]);
    expect(text.tooltip).toBe("svc-desktop\nModel: Tiny\nBase URL: http://127.0.0.1:41234 (also on the LAN)");
  });

  it("words each model state", () => {
    const line = (model: Parameters<typeof trayText>[0]["model"]) => trayText({ model, baseUrl: null, portNote: null, lanExposed: false }).lines[0];
    expect(line({ state: "no_model", name: null, error: null })).toBe("Model: none (open the window to choose one)");
    expect(line({ state: "loading", name: null, error: null })).toBe("Model: loading…");
    expect(line({ state: "error", name: null, error: "x".repeat(100) })).toMatch(/^Model: error \(x{59}…\)$/);
  });
});

describe("the development native binding", () => {
  it("is keyed by Electron version, platform and architecture", () => {
    expect(devNativeBindingPath("/repo", "45.4.1", "linux", "x64")).toBe(join("/repo", ".cache", "electron-native", "45.4.1-linux-x64", "better_sqlite3.node"));
  });

  it("is where scripts/electron-native.mjs writes it", () => {
    const script = readFileSync(new URL("../../scripts/electron-native.mjs", import.meta.url), "utf8");
    expect(script).toContain('join(root, ".cache", "electron-native", `${electronVersion}-${platform}-${arch}`)');
    expect(script).toContain('join(outDir, "better_sqlite3.node")');
  });

  it("is used only unpackaged and when the script built it", () => {
    const built = devNativeBindingPath("/repo", "45.4.1");
    expect(chooseNativeBinding({ appRoot: "/repo", electronVersion: "45.4.1", isPackaged: false, exists: (p) => p === built })).toBe(built);
    expect(chooseNativeBinding({ appRoot: "/repo", electronVersion: "45.4.1", isPackaged: false, exists: () => false })).toBeUndefined();
    expect(chooseNativeBinding({ appRoot: "/repo", electronVersion: "45.4.1", isPackaged: true, exists: () => true })).toBeUndefined();
  });
});
