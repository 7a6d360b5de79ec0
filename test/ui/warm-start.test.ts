// Issue 43 in the window: the Server page's Warm start switch (off by default) turns it on and the model loads
// again with it (/health says so); a chat with a long system prompt saves its prefix, which the page lists;
// Clear asks first, then deletes the files (and the engine saves the next one); off again loads the model
// without it and keeps what was saved. Started with warm start set
// by the start-up options, the switch shows that state, disabled, with a note in the window's words.
// Screenshots: warm-start-*.png (1280×860 and 800×600).
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { CLI_WORDS } from "./cli-words.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

/** About 2,200 tokens of the tiny model (about one token a character): over warm start's 1,024, within its 4,096 context. */
const SYSTEM = Array.from({ length: 330 }, (_, i) => ["answer", "question", "blue", "stars", "quiet", "rivers"][i % 6]).join(" ");

interface Health {
  warm_start: { enabled: boolean; min_tokens?: number; prefixes?: Array<{ tokens: number; bytes: number; last_used: number }> };
}

function savedStates(dataDir: string): string[] {
  const dir = join(dataDir, "warm-start");
  return existsSync(dir) ? readdirSync(dir).filter((name) => name.endsWith(".state")) : [];
}

describe.skipIf(skip !== null)("warm start in the window", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  const card = () => ui.page.getByTestId("warm-start");
  const state = () => card().getByTestId("warm-start-state").textContent();
  const health = async () => (await (await fetch(`${ui.server.url}/health`)).json()) as Health;

  /** Both screenshots, scrolled to the card: at 1280×860 and at 800×600. */
  async function screenshots(name: string) {
    await card().scrollIntoViewIfNeeded();
    await ui.page.screenshot({ path: join(ui.screenshotsDir, `${name}-1280.png`) });
    await ui.page.setViewportSize({ width: 800, height: 600 });
    try {
      await card().scrollIntoViewIfNeeded();
      await ui.page.screenshot({ path: join(ui.screenshotsDir, `${name}-800.png`) });
    } finally {
      await ui.page.setViewportSize({ width: 1280, height: 860 });
    }
  }

  it("is off by default; the switch turns it on, keeps the setting, and the model loads again with warm start", { timeout: 180_000 }, async () => {
    await ui.open("server");
    const toggle = card().getByTestId("warm-start-switch");
    expect(await toggle.isChecked()).toBe(false);
    expect(await toggle.isDisabled()).toBe(false);
    expect(await state()).toBe("Off: nothing is saved.");
    expect(await card().getByTestId("warm-prefix").count()).toBe(0);
    expect(await card().getByTestId("warm-clear").isDisabled()).toBe(true);
    expect(await card().getByTestId("warm-start-forced").count()).toBe(0);
    expect((await health()).warm_start).toEqual({ enabled: false });
    expect(await card().innerText()).not.toMatch(CLI_WORDS);
    await screenshots("warm-start-off");

    await toggle.click();
    await expect.poll(state, { timeout: 90_000 }).toBe("On: system prompts of 1,024 tokens or more are saved the first time they are read.");
    expect(await toggle.isChecked()).toBe(true);
    expect((await health()).warm_start).toEqual({ enabled: true, min_tokens: 1024, prefixes: [] });
    expect(ui.server.store.settings.get("warm_start")?.value).toBe("on");
    expect(ui.logs.since().some((l) => l.message === "Warm start on: loading the model again.")).toBe(true);
    // Every later load takes it too (a switch, a model's settings, a restart of the engine).
    expect(ui.server.models.loadOptions(ui.server.engineHost.files().current!).warmStart).toMatchObject({ dir: join(ui.dataDir, "warm-start") });
  });

  /** A new chat in the window with this system prompt, answered. */
  async function chatWith(system: string) {
    await ui.open("chat");
    await ui.page.getByTestId("chat-new").click();
    await ui.page.getByTestId("chat-effort").selectOption("none");
    await ui.page.getByTestId("chat-settings").click();
    await ui.page.getByTestId("settings-system-prompt").fill(system);
    await ui.page.getByTestId("chat-settings").click();
    await ui.page.getByTestId("chat-input").fill("Hello");
    await ui.page.getByTestId("chat-send").click();
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 120_000 }).toBe("done");
  }

  it("a chat with a long system prompt saves its prefix, and the Server page lists it", { timeout: 180_000 }, async () => {
    await chatWith(SYSTEM);
    expect(savedStates(ui.dataDir)).toHaveLength(1);

    await ui.open("server");
    const rows = card().getByTestId("warm-prefix");
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(1);
    const tokens = Number(await rows.first().getAttribute("data-tokens"));
    expect(tokens).toBeGreaterThanOrEqual(1024);
    expect(tokens).toBeLessThan(SYSTEM.length + 100);
    expect(await rows.first().getByTestId("warm-prefix-tokens").textContent()).toBe(tokens.toLocaleString("en-US"));
    const listed = (await health()).warm_start.prefixes!;
    expect(listed).toEqual([{ tokens, bytes: expect.any(Number), last_used: expect.any(Number) }]);
    expect(await rows.first().textContent()).toContain(new Date(listed[0]!.last_used * 1000).toLocaleDateString());
    await screenshots("warm-start-saved");
  });

  it("Clear asks first; Keep keeps the files, Delete removes them from disk and the list; later prompts are saved again", { timeout: 180_000 }, async () => {
    await card().getByTestId("warm-clear").click();
    const confirm = card().getByTestId("warm-clear-confirm");
    expect(await card().textContent()).toContain("Delete the saved prompt?");
    await screenshots("warm-start-confirm");
    await card().getByRole("button", { name: "Keep" }).click();
    expect(await confirm.count()).toBe(0);
    expect(savedStates(ui.dataDir)).toHaveLength(1);

    await card().getByTestId("warm-clear").click();
    await confirm.click();
    await expect.poll(() => card().getByTestId("warm-prefix").count()).toBe(0);
    expect(savedStates(ui.dataDir)).toEqual([]);
    expect((await health()).warm_start.prefixes).toEqual([]);
    expect(await card().getByTestId("warm-prefixes").textContent()).toContain("Nothing saved yet");

    // The running engine saves the next long prompt (into the folder the clear removed).
    await chatWith(SYSTEM.replace(/^answer/, "rivers"));
    expect(savedStates(ui.dataDir)).toHaveLength(1);
    await ui.open("server");
    await expect.poll(() => card().getByTestId("warm-prefix").count(), { timeout: 10_000 }).toBe(1);
  });

  it("the switch turns it off: the model loads again without warm start, and the setting says off", { timeout: 180_000 }, async () => {
    const toggle = card().getByTestId("warm-start-switch");
    await toggle.click();
    // What was saved stays listed (and on disk) until cleared.
    await expect.poll(state, { timeout: 90_000 }).toBe("Off: nothing more is saved. What was saved before stays until you clear it.");
    expect(await toggle.isChecked()).toBe(false);
    expect(await card().getByTestId("warm-prefix").count()).toBe(1);
    expect(savedStates(ui.dataDir)).toHaveLength(1);
    expect(await card().getByTestId("warm-clear").isDisabled()).toBe(false);
    expect((await health()).warm_start).toEqual({ enabled: false });
    expect(ui.server.store.settings.get("warm_start")?.value).toBe("off");
    expect(ui.server.models.loadOptions(ui.server.engineHost.files().current!).warmStart).toBeUndefined();
    expect(ui.pageErrors).toEqual([]);
    expect(await ui.axe()).toEqual([]);
    await screenshots("warm-start-off-again");
  });
});

describe.skipIf(skip !== null)("warm start set when the app was started", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    // As `--warm-start on` (or its environment variable) gives it; no model, so it starts at once.
    ui = await startUiHarness(undefined, { warmStart: true });
  });
  afterAll(async () => {
    await ui?.close();
  });

  it("the switch shows that state, disabled, with a note that names no command or option", async () => {
    await ui.open("server");
    const card = ui.page.getByTestId("warm-start");
    const toggle = card.getByTestId("warm-start-switch");
    expect(await toggle.isChecked()).toBe(true);
    expect(await toggle.isDisabled()).toBe(true);
    const note = await card.getByTestId("warm-start-forced").textContent();
    expect(note).toBe("Warm start was turned on when the app was started, so this switch does not apply until the app is started without that.");
    expect(await card.innerText()).not.toMatch(CLI_WORDS);
    // The console refuses it too, in the window's words.
    const refused = await ui.service.setWarmStart(false).catch((err: Error & { code?: string }) => err);
    expect(refused).toMatchObject({ code: "warm_start_forced" });
    expect((refused as Error).message).not.toMatch(CLI_WORDS);
    expect(ui.server.store.settings.get("warm_start")).toBeUndefined();
    await card.scrollIntoViewIfNeeded();
    await ui.page.screenshot({ path: join(ui.screenshotsDir, "warm-start-forced-1280.png") });
    await ui.page.setViewportSize({ width: 800, height: 600 });
    await card.scrollIntoViewIfNeeded();
    await ui.page.screenshot({ path: join(ui.screenshotsDir, "warm-start-forced-800.png") });
  });
});
