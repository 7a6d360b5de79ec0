// A vision model in the window, against the real server in Chromium: the Models page marks the model that
// has its projector beside it with a vision badge (and not the text-only one), and an image attached in the
// chat shows its thumbnail in the turn and goes to the model as a file part by id (which a vision model gets
// as an image). The vision model is the generated tiny model with the generated projector.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { writeTinyVisionModel } from "../../resources/test-model/tiny-vision.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("a vision model in the window", () => {
  let ui: UiHarness;
  const modelDir = mkdtempSync(join(tmpdir(), "svc-ui-vision-"));

  beforeAll(async () => {
    const tiny = readFileSync(inject("tinyModelPath"));
    ui = await startUiHarness(writeTinyVisionModel(modelDir, tiny));
    mkdirSync(join(ui.dataDir, "models"), { recursive: true });
    writeTinyVisionModel(join(ui.dataDir, "models"), tiny);
    writeFileSync(join(ui.dataDir, "models", "text-only.gguf"), tiny);
  }, 120_000);
  afterAll(async () => {
    await ui?.close();
    rmSync(modelDir, { recursive: true, force: true });
  });

  it("the Models page shows the vision badge on the model with a projector only", async () => {
    await ui.open("models");
    const row = (file: string) => ui.page.locator(`[data-testid="model-row"][data-file="${file}"]`);
    await row("tiny-vision.gguf").waitFor();
    expect(await row("tiny-vision.gguf").getByTestId("model-vision").textContent()).toBe("vision");
    expect(await row("text-only.gguf").getByTestId("model-vision").count()).toBe(0);
    expect(await ui.page.locator('[data-testid="model-row"][data-file="tiny-vision.mmproj.gguf"]').count()).toBe(0);
    // The loaded model's card says it sees images and where its vision process runs (here, as the text engine, the CPU).
    await expect.poll(() => ui.page.getByTestId("model-vision-process").textContent(), { timeout: 30_000 }).toBe("Sees images: its vision process runs on the CPU.");
    await ui.page.getByTestId("model-status").screenshot({ path: join(ui.screenshotsDir, "models-vision-process.png") });
  });

  it("an attached image shows its thumbnail in the turn and reaches the vision encoder", async () => {
    await ui.open("chat");
    const png = await sharp({ create: { width: 320, height: 200, channels: 3, background: "#cc3366" } }).png().toBuffer();
    await ui.page.getByTestId("chat-attach").setInputFiles({ name: "screenshot.png", mimeType: "image/png", buffer: png });
    await expect.poll(() => ui.page.getByTestId("chat-attachment").getByTestId("attachment-chip").getAttribute("data-state"), { timeout: 60_000 }).toBe("ready");
    await ui.page.getByTestId("chat-input").fill("What is wrong with this screenshot?");
    await ui.page.getByTestId("chat-send").click();
    const turn = ui.page.getByTestId("turn-user").last();
    await expect.poll(() => turn.getByTestId("turn-attachment").locator("img").count(), { timeout: 30_000 }).toBe(1);
    expect(await turn.getByTestId("turn-attachment").locator("img").getAttribute("src")).toMatch(/^(blob|data):/);
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 60_000 }).toBe("done");
    // The window sends the image as a file part by id, which a vision model gets as an image (proved with
    // svc_trace in test/e2e/vision.test.ts), and the window tells the model is loaded with its projector.
    const sent = ui.proxy.requests.filter((r) => r.path === "/v1/chat/completions").at(-1)!;
    const fileId = /"file_id":"(file-[^"]+)"/.exec(sent.body)![1]!;
    expect(ui.server.store.files.findAny(fileId)?.content_kind).toBe("image");
    // (On the CPU, as the text engine here.)
    expect(ui.server.engineHost.status().model?.vision).toEqual({ projector: join(modelDir, "tiny-vision.mmproj.gguf"), devices: ["CPU"], gpuLayers: 0 });
    await ui.screenshot("chat-vision-thumbnail");
    expect(await ui.axe()).toEqual([]);
  });
});
