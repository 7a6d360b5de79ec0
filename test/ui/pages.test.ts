// Every page of the window at 1280x860 and 800x600, light and dark: a screenshot of each (in
// test/.artifacts/screenshots, named page-size-theme.png) and axe-core's check, which must find no serious or
// critical accessibility violation. The chat is shown with a conversation in it (reasoning, markdown, code,
// attached files: an image with its thumbnail, a text file, and a refused file's chip in the message box).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { textPng } from "../support/file-fixtures.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

const PAGES = ["chat", "files", "batches", "keys", "audit", "models", "server"] as const;
const SIZES = [
  { width: 1280, height: 860 },
  { width: 800, height: 600 },
] as const;
const THEMES = ["light", "dark"] as const;

describe.skipIf(skip !== null)("every page, both sizes, both themes", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
    // A conversation to look at: a thought, then an answer with markdown and code.
    await ui.open("chat");
    await ui.page.getByTestId("chat-effort").selectOption("low");
    const drop = async (files: Array<{ name: string; type: string; base64: string }>) =>
      ui.page.getByTestId("chat-page").dispatchEvent("drop", {
        dataTransfer: await ui.page.evaluateHandle((list) => {
          const dt = new DataTransfer();
          for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.base64), (c) => c.charCodeAt(0))], f.name, { type: f.type }));
          return dt;
        }, files),
      });
    await drop([
      { name: "forecast.png", type: "image/png", base64: (await textPng(["Rain at noon", "12 degrees"])).toString("base64") },
      { name: "notes.md", type: "text/markdown", base64: Buffer.from("# Trip\nPack an umbrella.\n").toString("base64") },
    ]);
    await ui.page.locator('[data-testid="chat-attachment"][data-state="ready"]').nth(1).waitFor({ timeout: 60_000 });
    await ui.page.getByTestId("chat-input").fill("What is the weather like?");
    await ui.page.getByTestId("chat-send").click();
    await ui.page.locator('[data-testid="turn-assistant"][data-status="done"]').waitFor({ timeout: 30_000 });
    ui.proxy.cannedAnswer = "Here is **a plan**:\n\n1. Read the file.\n2. Count the lines.\n\n```js\nconst lines = text.split(\"\\n\").length; // count\n```";
    await ui.page.getByTestId("chat-input").fill("How do I count lines in JavaScript?");
    await ui.page.getByTestId("chat-send").click();
    await ui.page.locator('[data-testid="turn-assistant"][data-status="done"]').nth(1).waitFor({ timeout: 30_000 });
    await drop([{ name: "server.pem", type: "application/x-pem-file", base64: Buffer.from("-----BEGIN CERTIFICATE-----\n").toString("base64") }]);
    await ui.page.locator('[data-testid="chat-attachment"][data-state="refused"]').waitFor();
    // A key, so the Keys page has a row besides the window's own.
    await ui.service.createKey({ name: "my editor" });
  });

  afterAll(async () => {
    await ui?.close();
  });

  it("axe really checks: a planted nameless button and grey-on-grey text are reported", async () => {
    await ui.open("keys");
    await ui.page.evaluate(() => {
      const planted = document.createElement("div");
      planted.id = "planted";
      planted.innerHTML = '<button></button><p style="color:#bbb;background:#ccc">faint</p>';
      document.querySelector("main")!.append(planted);
    });
    const found = await ui.axe();
    await ui.page.evaluate(() => document.getElementById("planted")?.remove());
    expect(found.some((v) => v.startsWith("critical button-name"))).toBe(true);
    expect(found.some((v) => v.startsWith("serious color-contrast"))).toBe(true);
  });

  for (const theme of THEMES)
    for (const size of SIZES)
      it(`${theme}, ${size.width}x${size.height}: screenshots and no serious or critical axe violation`, async () => {
        await ui.page.setViewportSize(size);
        await ui.page.getByTestId("theme-switch").selectOption(theme);
        const found: string[] = [];
        for (const name of PAGES) {
          await ui.open(name);
          // Let the page's first poll land (status, lists) before judging it.
          await ui.page.waitForTimeout(350);
          await ui.page.screenshot({ path: `${ui.screenshotsDir}/${name}-${size.width}x${size.height}-${theme}.png` });
          for (const violation of await ui.axe()) found.push(`${name}: ${violation}`);
        }
        expect(found).toEqual([]);
        expect(ui.pageErrors).toEqual([]);
      });
});
