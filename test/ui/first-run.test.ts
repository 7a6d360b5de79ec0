// A first run of the window: no model anywhere, so it offers the recommended one; one click downloads it
// (from a loopback stand-in for Hugging Face), the server loads it, and the chat answers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { buildTinyVisionProjector } from "../../resources/test-model/tiny-vision.js";
import { RECOMMENDED_MODEL, RECOMMENDED_VISION_MODEL } from "../../server/features/models/model-sources.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

/**
 * A window on a first run (no model anywhere) whose Hugging Face, a loopback stand-in, answers `source` (an
 * hf:user/repo:QUANT URI, as the downloader resolves it) with a tiny model, and with a projector beside it
 * in the manifest when `projector`. Set up before the describe's tests, closed after them.
 */
function firstRun(source: string, projector = false): { ui: UiHarness; hub: ModelServer } {
  const run = {} as { ui: UiHarness; hub: ModelServer };
  const savedEndpoint = process.env.HF_ENDPOINT;
  beforeAll(async () => {
    run.hub = await startModelServer();
    const [repo, quant] = source.replace(/^hf:/, "").split(":") as [string, string];
    run.hub.manifests.set(`${repo}:${quant}`, `model-${quant}.gguf`);
    run.hub.files.set(`/${repo}/resolve/main/model-${quant}.gguf`, buildTinyModel({ seed: 5 }));
    if (projector) {
      run.hub.projectors.set(`${repo}:${quant}`, "mmproj-model-f16.gguf");
      run.hub.files.set(`/${repo}/resolve/main/mmproj-model-f16.gguf`, buildTinyVisionProjector());
    }
    process.env.HF_ENDPOINT = `${run.hub.url}/`;
    run.ui = await startUiHarness();
  });
  afterAll(async () => {
    if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = savedEndpoint;
    await run.ui?.close();
    await run.hub?.close();
  });
  return run;
}

describe.skipIf(skip !== null)("the window on a first run", () => {
  const run = firstRun(RECOMMENDED_MODEL.source);

  it("offers the recommended model in the chat, downloads it with one click, says when it is ready, and chats", async () => {
    const { ui, hub } = run;
    await ui.open("chat");
    const offer = ui.page.getByTestId("first-run");
    await offer.waitFor();
    expect(await offer.textContent()).toContain(RECOMMENDED_MODEL.title);
    // And one small model that also sees images, with its own button.
    expect(await offer.getByTestId("first-run-vision").textContent()).toContain(`Or one that also sees images: ${RECOMMENDED_VISION_MODEL.title}.`);
    expect(await offer.getByTestId("first-run-download-vision").textContent()).toMatch(new RegExp(`Download ${RECOMMENDED_VISION_MODEL.title.replace(/[()]/g, "\\$&")} \\(3\\.\\d+ GB\\)`));
    // Nothing can be sent without a model, and the message box stays in view under the offer.
    await ui.page.getByTestId("chat-input").fill("Hello?");
    expect(await ui.page.getByTestId("chat-send").isDisabled()).toBe(true);
    const box = (await ui.page.getByTestId("chat-input").boundingBox())!;
    expect(box.y + box.height).toBeLessThanOrEqual(860);
    await ui.screenshot("first-run");
    // The offer belongs to the chat: other pages do not repeat it.
    await ui.open("keys");
    expect(await ui.page.getByTestId("first-run").isVisible()).toBe(false);
    await ui.open("chat");

    await ui.page.getByTestId("first-run-download").click();
    await expect.poll(() => offer.count()).toBe(0);
    // The download's progress shows where the offer was, then the chat says the model is ready.
    const ready = ui.page.getByTestId("model-ready");
    await ready.waitFor({ timeout: 60_000 });
    expect(await ready.textContent()).toMatch(/is ready — the download is complete/);
    expect(hub.requests.some((r) => r.path.endsWith(".gguf"))).toBe(true);
    expect(await ui.page.getByTestId("chat-send").isEnabled()).toBe(true);
    await ui.screenshot("first-run-done");

    await ui.open("models");
    await expect.poll(() => ui.page.getByTestId("model-row").filter({ hasText: "loaded" }).count()).toBe(1);
    expect(await ui.page.getByTestId("model-row").filter({ hasText: "default" }).count()).toBe(1);

    await ui.open("chat");
    await ui.page.getByTestId("chat-effort").selectOption("none");
    await ui.page.getByTestId("chat-send").click();
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    expect(((await answer.getByTestId("turn-content").textContent()) ?? "").trim().length).toBeGreaterThan(0);
    expect(await offer.count()).toBe(0);
  });
});

describe.skipIf(skip !== null)("the window on a first run, choosing the model that sees images", () => {
  const run = firstRun(RECOMMENDED_VISION_MODEL.source, true);

  it("downloads the vision model with its projector in one click; it loads seeing images", async () => {
    const { ui, hub } = run;
    await ui.open("chat");
    const offer = ui.page.getByTestId("first-run");
    await offer.waitFor();
    await offer.getByTestId("first-run-download-vision").click();
    await ui.page.getByTestId("model-ready").waitFor({ timeout: 60_000 });
    expect(hub.requests.some((r) => r.path.endsWith("mmproj-model-f16.gguf"))).toBe(true);
    // Seen once under the whole suite's load: no vision after 60 s. The server's last log lines say why.
    await expect
      .poll(() => ui.server.engineHost.status().model?.vision ?? null, { timeout: 60_000 })
      .toEqual({ projector: expect.stringMatching(/hf_ggml-org_gemma-3-4b-it\.Q4_K_M\.mmproj\.gguf$/), devices: ["CPU"], gpuLayers: 0 })
      .catch((err: Error) => {
        const lines = ui.logs.since().slice(-30).map((l) => `${l.level} ${l.message}`);
        throw new Error(`${err.message}\nThe server's last log lines:\n${lines.join("\n")}`);
      });
    await ui.open("models");
    const row = ui.page.getByTestId("model-row").filter({ hasText: RECOMMENDED_VISION_MODEL.file });
    await expect.poll(() => row.getByTestId("model-vision").count()).toBe(1);
    expect(await row.textContent()).toContain("loaded");
    // The suggestion says it sees images, and that it is here.
    const suggested = ui.page.getByTestId("suggested-model").filter({ hasText: RECOMMENDED_VISION_MODEL.title });
    expect(await suggested.getByTestId("suggested-vision").count()).toBe(1);
    expect(await suggested.getByTestId("suggested-use").count()).toBe(1);
    expect(ui.pageErrors).toEqual([]);
  }, 120_000);
});
