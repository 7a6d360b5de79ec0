// A first run of the window: no model anywhere, so it offers the recommended one; one click downloads it
// (from a loopback stand-in for Hugging Face), the server loads it, and the chat answers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { RECOMMENDED_MODEL } from "../../server/features/models/model-sources.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("the window on a first run", () => {
  let ui: UiHarness;
  let hub: ModelServer;
  const savedEndpoint = process.env.HF_ENDPOINT;

  beforeAll(async () => {
    hub = await startModelServer();
    // hf:Qwen/Qwen3-4B-GGUF:Q4_K_M, as the downloader resolves it, answered with a tiny model.
    const [repo, quant] = RECOMMENDED_MODEL.source.replace(/^hf:/, "").split(":") as [string, string];
    hub.manifests.set(`${repo}:${quant}`, `model-${quant}.gguf`);
    hub.files.set(`/${repo}/resolve/main/model-${quant}.gguf`, buildTinyModel({ seed: 5 }));
    process.env.HF_ENDPOINT = `${hub.url}/`;
    ui = await startUiHarness();
  });

  afterAll(async () => {
    if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = savedEndpoint;
    await ui?.close();
    await hub?.close();
  });

  it("offers the recommended model, downloads it with one click, loads it and chats", async () => {
    await ui.open("chat");
    const offer = ui.page.getByTestId("first-run");
    await offer.waitFor();
    expect(await offer.textContent()).toContain(RECOMMENDED_MODEL.title);
    await ui.screenshot("first-run");

    await ui.page.getByTestId("first-run-download").click();
    await ui.page.getByTestId("models-page").waitFor();
    await expect.poll(() => offer.count()).toBe(0);
    const download = ui.page.getByTestId("download").first();
    await expect.poll(() => download.getAttribute("data-phase"), { timeout: 30_000 }).toBe("done");
    expect(hub.requests.some((r) => r.path.endsWith(".gguf"))).toBe(true);
    // The download became the active model; the server follows the setting and loads it.
    await expect.poll(() => ui.page.getByTestId("model-state").textContent(), { timeout: 30_000 }).toContain("ready");
    expect(await ui.page.getByTestId("model-row").filter({ hasText: "active" }).count()).toBe(1);
    await ui.screenshot("first-run-done");

    await ui.open("chat");
    await ui.page.getByTestId("chat-mode").selectOption("fast");
    await ui.page.getByTestId("chat-input").fill("Hello?");
    await ui.page.getByTestId("chat-send").click();
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    expect(((await answer.getByTestId("turn-content").textContent()) ?? "").trim().length).toBeGreaterThan(0);
    expect(await offer.count()).toBe(0);
  });
});
