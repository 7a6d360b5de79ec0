// Issue 44 in the window: the Server page's line on speculative decoding, from what the engine host counts
// (EngineHost.speculation: /health's `speculation`, the console's status). The harness's model makes no
// guesses a text prompt can confirm (test/e2e/speculation-surfaces.test.ts has real counts), so the counts
// are stood in for here; the words are labels.ts's speculationLabel (test/unit/speculation-label.test.ts).
// Screenshot: speculation.png.
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
});
