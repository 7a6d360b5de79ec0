// Issue 44 in the window: the Server page's line on speculative decoding, from what the engine host counts
// (EngineHost.speculation: /health's `speculation`, the console's status). The harness's model makes no
// guesses a text prompt can confirm (test/e2e/speculation-surfaces.test.ts has real counts), so the counts
// are stood in for here; the words are labels.ts's speculationLabel (test/unit/speculation-label.test.ts).
// Screenshot: speculation.png.
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import type { SpeculationCounts } from "../../server/engine/types.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("speculative decoding on the Server page", () => {
  let ui: UiHarness;
  let report: SpeculationCounts | null | undefined;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
    const real = ui.server.engineHost.speculation.bind(ui.server.engineHost);
    vi.spyOn(ui.server.engineHost, "speculation").mockImplementation(() => (report === undefined ? real() : report));
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await ui?.close();
  });

  const line = () => ui.page.getByTestId("server-speculation");
  /** The engine's report changes; an API request ending has the window read the status again. */
  async function reports(next: SpeculationCounts | null) {
    report = next;
    await (await fetch(`${ui.server.url}/v1/models`)).text();
  }

  it("shows the engine's own report: prompt lookup, no guess yet", async () => {
    await ui.open("server");
    await ui.page.getByTestId("server-model").waitFor();
    await expect.poll(() => line().textContent()).toBe("Prompt lookup, no drafts yet");
  });

  it("says the acceptance rate with the drafted count, before any draft, and off", async () => {
    await reports({ mode: "prompt-lookup", draftModel: null, draftedTokens: 0, acceptedTokens: 0, acceptanceRate: null });
    await expect.poll(() => line().textContent()).toBe("Prompt lookup, no drafts yet");

    await reports({ mode: "prompt-lookup", draftModel: null, draftedTokens: 1234, acceptedTokens: 901, acceptanceRate: 901 / 1234 });
    await expect.poll(() => line().textContent()).toBe("Prompt lookup, 73% of 1,234 drafted tokens accepted");
    // The label above it, as the other facts of the Running card have theirs.
    expect(await ui.page.getByTestId("server-state").innerText()).toContain("Speculative decoding\nPrompt lookup, 73% of 1,234 drafted tokens accepted");
    expect(await ui.axe()).toEqual([]);
    await ui.page.getByTestId("server-state").screenshot({ path: `${ui.screenshotsDir}/speculation.png` });

    // With a draft model (--draft-model, or the model's own setting), it is named.
    await reports({ mode: "draft-model", draftModel: "Qwen2.5 0.5B Instruct", draftedTokens: 980, acceptedTokens: 598, acceptanceRate: 598 / 980 });
    await expect.poll(() => line().textContent()).toBe("Draft model Qwen2.5 0.5B Instruct, 61% of 980 drafted tokens accepted");

    await reports({ mode: "off", draftModel: null, draftedTokens: 0, acceptedTokens: 0, acceptanceRate: null });
    await expect.poll(() => line().textContent()).toBe("Off");
  });

  it("is gone again when no model is loaded or it is served upstream (null)", async () => {
    await reports(null);
    await expect.poll(() => line().count()).toBe(0);
    expect(ui.pageErrors).toEqual([]);
  });

  it("the model's settings take a draft model from the models folder (or its row's Use as draft): the model loads again with it, and the Server page names it", async () => {
    report = undefined;
    // A second model file in the models folder (the tiny model again: the same vocabulary, so it can draft).
    mkdirSync(join(ui.dataDir, "models"), { recursive: true });
    copyFileSync(inject("tinyModelPath"), join(ui.dataDir, "models", "tiny-draft.gguf"));
    await ui.open("models");
    const settings = ui.page.getByTestId("loaded-model-settings");
    await settings.waitFor();
    if ((await settings.getAttribute("open")) === null) await settings.locator("summary").click();
    const select = settings.getByTestId("model-settings-draftModel");
    await expect.poll(() => select.locator("option").allTextContents()).toEqual(["None: guess from the conversation (prompt lookup)", "tiny-draft.gguf"]);
    await select.selectOption("tiny-draft.gguf");
    await settings.getByTestId("model-settings-apply").click();
    await expect.poll(() => ui.server.engineHost.status().model?.draftModel?.name, { timeout: 60_000 }).toBe("svc tiny test model");
    const health = (await (await fetch(`${ui.server.url}/health`)).json()) as { speculation: { mode: string; draft_model: string } };
    expect(health.speculation).toMatchObject({ mode: "draft-model", draft_model: "svc tiny test model" });
    await expect.poll(() => select.inputValue()).toBe("tiny-draft.gguf");
    await settings.screenshot({ path: `${ui.screenshotsDir}/draft-model-setting.png` });
    await ui.open("server");
    await expect.poll(() => line().textContent()).toBe("Draft model svc tiny test model, no drafts yet");
    // And back to none: prompt lookup again.
    await ui.open("models");
    await ui.page.getByTestId("loaded-model-settings").getByTestId("model-settings-draftModel").selectOption("");
    await ui.page.getByTestId("loaded-model-settings").getByTestId("model-settings-apply").click();
    await expect.poll(() => ui.server.engineHost.status().model?.speculation, { timeout: 60_000 }).toBe("prompt-lookup");
    // The file's row does the same in one click ("Use as draft" for the model serving now), and then has no such button.
    const row = ui.page.getByTestId("model-row").filter({ hasText: "tiny-draft.gguf" });
    await row.getByTestId("model-use-as-draft").click();
    await expect.poll(() => ui.server.engineHost.status().model?.speculation, { timeout: 60_000 }).toBe("draft-model");
    await expect.poll(() => row.getByTestId("model-use-as-draft").count()).toBe(0);
    expect(await ui.axe()).toEqual([]);
    expect(ui.pageErrors).toEqual([]);
  }, 120_000);
});
